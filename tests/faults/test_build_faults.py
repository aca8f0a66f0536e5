"""The whole build under faults: an LLM server that misbehaves at random, and SIGKILLs at random points.

Both run the real thing: `build_flow` on a real Prefect server, the real openai client against the
scripted server on 127.0.0.1, and (for the kills) the installed `benchsmith build` command pushing to a
real Label Studio.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from benchsmith.llm import LlmRequest
from ingest.scenes import make_scenes
from benchsmith.settings import load_settings
from benchsmith.store import Store
from benchsmith.store.schema import llm_calls
from tests.faults.conftest import BENCHSMITH
from tests.support.openai_server import Reply, ScriptedOpenAI, chat_completion, error, json_completion

LLM_ENV = {
    "OPENAI_API_KEY": "sk-test-not-a-real-key",
    "BENCHSMITH__GENERATE__GENERATORS": "[programmatic, llm]",
    "BENCHSMITH__GENERATE__LLM__OPTIONS__TIMEOUT_S": "1",
    "BENCHSMITH__GENERATE__LLM__OPTIONS__MAX_RETRIES": "2",
    "BENCHSMITH__GENERATE__LLM__OPTIONS__BACKOFF_S": "0",
    "BENCHSMITH__GENERATE__LLM__OPTIONS__CONCURRENCY": "6",
    "BENCHSMITH__GENERATE__LLM__BATCH_SIZE": "6",
}


def good_reply(request: dict) -> Reply:
    """Two valid questions whose wording depends on the prompt, so each image gets its own."""
    tag = hashlib.sha256(json.dumps(request["messages"]).encode()).hexdigest()[:8]  # same prompt, same reply
    return json_completion({"questions": [
        {"question": f"Which shape sits closest to the top edge of the picture? ({tag})",
         "options": ["circle", "square", "star", "diamond"], "answer": "B"},
        {"question": f"What colour is the background of the picture? ({tag})",
         "options": ["cream", "light grey", "pale blue", "pale green"], "answer": "A"}]},
        prompt_tokens=800, completion_tokens=90)


def faulty(seed: int):
    """429s, 500s, hangs past the client's timeout, garbage and schema violations, mixed with good replies."""
    rng = random.Random(seed)
    lock = threading.Lock()

    def reply(request: dict) -> Reply:
        with lock:
            roll = rng.random()
        if roll < 0.15:
            return error(429, "slow down", retry_after=0)
        if roll < 0.30:
            return error(500, "internal error")
        if roll < 0.40:
            return Reply(**{**good_reply(request).__dict__, "delay": 2.5})  # past the 1 s timeout
        if roll < 0.50:
            return chat_completion("Sure! Here are some questions: {not json")
        if roll < 0.58:
            return json_completion({"questions": [{"question": "Too few options?", "options": ["a", "b"],
                                                   "answer": "A"}]})
        if roll < 0.62:
            return Reply(status=200, body="<html>bad gateway</html>")
        return good_reply(request)
    return reply


def key_of(body: dict) -> str:
    return LlmRequest(purpose="generate", model=body["model"], messages=body["messages"],
                      temperature=body.get("temperature"), seed=body.get("seed"), max_tokens=body.get("max_tokens"),
                      response_format=body.get("response_format")).key


def paid_keys(db_url: str) -> set[str]:
    with Store(db_url) as store, store.engine.connect() as conn:
        return set(conn.scalars(sa.select(llm_calls.c.key).where(llm_calls.c.status == "ok")))


SCENES = 12
IMAGE_DIMENSIONS = 9


def test_a_build_against_a_faulty_llm_server_completes_and_a_rerun_finishes_the_rest(prefect_api, tmp_path):
    from flows.build import build_flow

    with ScriptedOpenAI(faulty(seed=3)) as server:
        env = {"BENCHSMITH_WORKSPACE": str(tmp_path / "bench"), "OPENAI_BASE_URL": server.base_url} | LLM_ENV
        settings = load_settings(env=env)
        sources = [str(make_scenes(tmp_path / "scenes", SCENES, seed=31))]
        first = build_flow(settings, sources)  # completes: no fault escapes as an exception
        llm = first["generate"]["generate llm"]
        assert llm["jobs"] == SCENES * IMAGE_DIMENSIONS
        assert llm["failed_drafts"] > 0 and llm["retry_later"] > 0 and llm["kept"] > 0, llm
        paid_after_first = paid_keys(settings.db_url)
        calls_after_first = server.calls

        with Store(settings.db_url) as store:
            failed = [r for r in store.ledger_rows("generate:llm") if r["status"] == "failed"]
        assert failed and all(r["reason"] and "raw" in r["details"] for r in failed)  # each bad draft, with its text

        server.responder = good_reply
        second = build_flow(settings, sources)
        rerun_keys = [key_of(body) for body in server.requests[calls_after_first:]]
        assert second["generate"]["generate llm"]["retry_later"] == 0
        assert rerun_keys and not set(rerun_keys) & paid_after_first  # nothing paid for was asked again

        with Store(settings.db_url) as store:
            done = store.ledger_rows("generate:llm")
        assert len(done) == SCENES * IMAGE_DIMENSIONS  # every job ended


@pytest.mark.slow(seconds=200)
def test_sigkill_at_random_points_loses_nothing_duplicates_nothing_and_repays_nothing(
        prefect_api, label_studio, tmp_path):
    settings = label_studio.settings()
    workspace = settings.workspace
    env = {k: v for k, v in label_studio.env.items() if k != "BENCHSMITH_WORKSPACE"} | LLM_ENV | {
        "BENCHSMITH_WORKSPACE": str(workspace), "BENCHSMITH__REVIEW__PROJECT": settings.raw["review"]["project"],
        "PREFECT_API_URL": prefect_api, "BENCHSMITH__GENERATE__LLM__OPTIONS__CONCURRENCY": "2",
        "BENCHSMITH__GENERATE__LLM__BATCH_SIZE": "2", "BENCHSMITH__REVIEW__BATCH_SIZE": "40"}
    scenes = [str(make_scenes(tmp_path / "scenes", SCENES, seed=32))]
    rng = random.Random(11)

    def slow_good(request: dict) -> Reply:
        return Reply(**{**good_reply(request).__dict__, "delay": 0.1})

    with ScriptedOpenAI(slow_good) as server:
        command = [BENCHSMITH, "build", *scenes]
        for round_ in range(4):
            paid_before = paid_keys(settings.db_url) if Path(settings.db_url.removeprefix("sqlite:///")).exists() else set()
            sent_before = server.calls
            run = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            time.sleep(rng.uniform(3, 20))
            if run.poll() is None:
                os.kill(run.pid, signal.SIGKILL)
            run.wait()
            again = {key_of(body) for body in server.requests[sent_before:]} & paid_before
            assert not again, f"round {round_}: {len(again)} paid calls were made again"

        paid_before, sent_before = paid_keys(settings.db_url), server.calls
        final = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
        assert final.returncode == 0, final.stdout[-3000:] + final.stderr[-3000:]
        assert not {key_of(body) for body in server.requests[sent_before:]} & paid_before

        # The same build once more, in a fresh workspace with no kills (and no review), as the reference.
        reference_env = {k: v for k, v in env.items() if k != "LABEL_STUDIO_API_KEY"} | {
            "BENCHSMITH_WORKSPACE": str(tmp_path / "reference")}
        reference = subprocess.run(command, env=reference_env, cwd=tmp_path, capture_output=True, text=True,
                                   timeout=900)
        assert reference.returncode == 0, reference.stdout[-3000:] + reference.stderr[-3000:]

    with Store(settings.db_url) as store, Store(load_settings(env=reference_env).db_url) as expected:
        assert {i.id for i in store.get_items()} == {i.id for i in expected.get_items()}   # no item lost
        questions = store.get_questions()
        # the same questions as a run that was never killed: none lost, none twice, none made up anew
        assert sorted(q.id for q in questions) == sorted(q.id for q in expected.get_questions())
        in_review = {q.id for q in questions if q.status == "in_review"}
        tasks = store.get_review_tasks("question")
    assert in_review and set(tasks) == in_review and all(task for _, task in tasks.values())

    token = label_studio.env["LABEL_STUDIO_API_KEY"]
    project_id = next(iter(tasks.values()))[0]
    on_server = []
    page = 1
    while True:  # every task on the server, by the question id each one carries
        reply = httpx.get(f"{label_studio.url}/api/tasks", params={"project": project_id, "page": page,
                                                                 "page_size": 500},
                          headers={"Authorization": f"Token {token}"}, timeout=60)
        if reply.status_code == 404:
            break
        batch = reply.json()
        batch = batch.get("tasks", batch) if isinstance(batch, dict) else batch
        if not batch:
            break
        on_server += [t["data"]["question_id"] for t in batch]
        page += 1
    assert sorted(on_server) == sorted(in_review)                      # exactly one task per question
