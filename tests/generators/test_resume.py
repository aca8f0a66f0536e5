"""`benchsmith generate` killed with SIGKILL halfway, then rerun: no paid call repeated, no duplicate question."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import sqlalchemy as sa

from benchsmith.llm import LlmRequest
from benchsmith.records import normalise_text
from benchsmith.store import Store
from benchsmith.store.schema import llm_calls
from tests.generators.test_stage import add_oracle
from tests.support.openai_server import Reply, ScriptedOpenAI, json_completion

BENCHSMITH = str(Path(sys.executable).with_name("benchsmith"))


def two_questions(request: dict) -> Reply:
    dimension = request["messages"][1]["content"].split(".")[0].removeprefix("Dimension: ")
    facts = request["messages"][1]["content"].split("<image_facts>")[1][:400]
    tag = str(abs(hash(facts)) % 100_000)
    reply = json_completion({"questions": [
        {"question": f"Which shape is nearest the top edge? ({dimension} {tag})",
         "options": ["circle", "square", "star", "diamond"], "answer": "B"},
        {"question": f"What is the background colour? ({dimension} {tag})",
         "options": ["cream", "light grey", "pale blue", "pale green"], "answer": "A"}]})
    reply.delay = 0.15
    return reply


def key_of(body: dict) -> str:
    """The cache key of what the server was asked, recomputed from the HTTP body."""
    return LlmRequest(purpose="generate", model=body["model"], messages=body["messages"],
                      temperature=body.get("temperature"), seed=body.get("seed"), max_tokens=body.get("max_tokens"),
                      response_format=body.get("response_format")).key


def generate_env(workspace, base_url: str) -> dict[str, str]:
    """The environment of a `benchsmith generate` subprocess on `workspace` against a scripted server."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "OPENAI"))} | {
        "BENCHSMITH_WORKSPACE": str(workspace), "OPENAI_BASE_URL": base_url,
        "BENCHSMITH__GENERATE__LLM__OPTIONS__CONCURRENCY": "4", "BENCHSMITH__GENERATE__LLM__BATCH_SIZE": "8"}


def test_a_killed_run_resumes_without_paying_twice_or_duplicating(tmp_path, oracle_dir):
    workspace = tmp_path / "bench"
    db_url = f"sqlite:///{workspace / 'benchsmith.db'}"
    with Store(db_url) as store:
        add_oracle(store, oracle_dir, 8)
    jobs = 8 * 9
    with ScriptedOpenAI(two_questions) as server:
        env = generate_env(workspace, server.base_url)
        command = [BENCHSMITH, "generate", "--generator", "llm"]
        first = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while server.calls < jobs // 2 and time.time() < deadline and first.poll() is None:
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        assert first.returncode == -signal.SIGKILL, first.stdout.read().decode()

        with Store(db_url) as store:
            with store.engine.connect() as conn:
                paid = set(conn.scalars(sa.select(llm_calls.c.key).where(llm_calls.c.status == "ok")))
            questions_before = len(store.get_questions())
        assert 0 < len(paid) < jobs and questions_before < jobs * 2
        sent_before = server.calls
        assert paid <= {key_of(body) for body in server.requests[:sent_before]}  # key_of matches the client's

        second = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stdout + second.stderr
        rerun_keys = [key_of(body) for body in server.requests[sent_before:]]

        third = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert third.returncode == 0 and server.calls == sent_before + len(rerun_keys)  # complete: 0 calls

    assert rerun_keys and not set(rerun_keys) & paid
    assert len(set(rerun_keys)) == len(rerun_keys)
    with Store(db_url) as store:
        questions = store.get_questions()
        done = store.ledger_rows("generate:llm")
    assert len(done) == jobs and {r["status"] for r in done} == {"done"}
    assert len(questions) == jobs * 2
    assert max(Counter((q.item_id, normalise_text(q.text)) for q in questions).values()) == 1
