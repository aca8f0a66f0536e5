"""A canary API key sent down every failure path of a real `benchsmith build` appears nowhere afterwards.

The scripted server echoes the key back the way providers do (a 401 with the key whole and masked, a 500
with the key, an HTML page with status 200 that quotes it, which becomes an exception message in the
client). Then every place the run writes is searched for the key and for any 8 characters of it in a
row: stdout, stderr, the workspace (the store, each table dumped as text, reports), and Prefect's home
and result storage.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
from pathlib import Path

from ingest.scenes import make_scenes
from tests.faults.conftest import BENCHSMITH
from tests.faults.test_build_faults import good_reply
from tests.support.openai_server import Reply, echo_key, error

CANARY = "sk-canary-7e1d4b9a2c5f8e0b3d6a9c2f5e8b1d4a"


def fragments(secret: str, length: int = 8) -> set[str]:
    return {secret[i:i + length] for i in range(len(secret) - length + 1)}


def leaking(request: dict) -> Reply:
    """Each prompt meets one failure path, chosen by its hash, so reruns meet the same one."""
    roll = int(hashlib.sha256(json.dumps(request["messages"]).encode()).hexdigest(), 16) % 4
    key = request.get("_authorization", "").removeprefix("Bearer ")
    if roll == 0:
        return echo_key(401, request)
    if roll == 1:
        return error(500, f"upstream rejected credentials {key} (masked {key[:3]}****{key[-10:]})")
    if roll == 2:
        return Reply(status=200, content_type="text/html",
                     body=f"<html><body>Proxy error for key {key}</body></html>")
    return good_reply(request)


def texts_under(folder: Path):
    """(path, text) for every file under `folder`, SQLite databases also as a dump of all their tables."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        yield str(path), data.decode("utf-8", "replace")
        if data.startswith(b"SQLite format 3"):
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
                yield f"{path} (dump)", "\n".join(conn.iterdump())


def test_a_canary_key_sent_through_every_failure_path_appears_nowhere(prefect_api, tmp_path):
    from tests.support.openai_server import ScriptedOpenAI

    workspace, storage = tmp_path / "bench", tmp_path / "prefect-results"
    scenes = make_scenes(tmp_path / "scenes", 3, seed=5)
    with ScriptedOpenAI(leaking) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "OPENAI"))} | {
            "BENCHSMITH_WORKSPACE": str(workspace), "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": CANARY,
            "PREFECT_API_URL": prefect_api, "PREFECT_LOCAL_STORAGE_PATH": str(storage),
            "BENCHSMITH__GENERATE__GENERATORS": "[programmatic, llm]",
            "BENCHSMITH__GENERATE__LLM__OPTIONS__MAX_RETRIES": "1",
            "BENCHSMITH__GENERATE__LLM__OPTIONS__BACKOFF_S": "0"}
        env.pop("LABEL_STUDIO_API_KEY", None)
        run = subprocess.run([BENCHSMITH, "build", str(scenes)], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=600)
        statuses = {r.get("_authorization") == f"Bearer {CANARY}" for r in server.requests}
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert statuses == {True} and server.calls >= 4  # the key was really sent, down every path

    places = [("stdout", run.stdout), ("stderr", run.stderr)]
    places += list(texts_under(workspace)) + list(texts_under(storage))
    places += list(texts_under(Path(os.environ["PREFECT_HOME"])))
    found = [(where, piece) for where, text in places for piece in fragments(CANARY) if piece in text]
    assert not found, found[:5]
    assert "[redacted]" in run.stdout + "".join(text for _, text in texts_under(workspace))
