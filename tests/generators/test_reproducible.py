"""The same LLM answers give the same benchmark, whatever order they arrive in: `benchsmith generate -g llm`
then `benchsmith filter`, run three times against a server whose latency jitters with a different seed each
time (the third run killed halfway and resumed), store the same questions, statuses, answer letters and
blind verdicts."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time

import sqlalchemy as sa

from benchsmith.store import Store
from tests.generators.test_resume import BENCHSMITH, generate_env
from tests.generators.test_stage import add_oracle
from tests.support.openai_server import Reply, ScriptedOpenAI, json_completion, jittered

SCENES = 8
JOBS = SCENES * 9


def siblings_that_compete(request: dict) -> Reply:
    """Three questions per job: one the image's every dimension asks alike (near-duplicates of each other)
    and two of the dimension's own, so the per-item cap and the near-duplicate rule both have to choose."""
    prompt = request["messages"][1]["content"]
    dimension = prompt.split(".")[0].removeprefix("Dimension: ")
    image = hashlib.sha256(prompt.split("<image_facts>")[1].encode()).hexdigest()[:8]
    return json_completion({"questions": [
        {"question": f"Which shape is nearest the top edge of picture {image}?",
         "options": ["circle", "square", "star", "diamond"], "answer": "B"},
        {"question": f"What is the background colour behind the {dimension} ({image})?",
         "options": ["cream", "light grey", "pale blue", "pale green"], "answer": "A"},
        {"question": f"How many shapes does the {dimension} involve ({image})?",
         "options": ["one", "two", "three", "four"], "answer": "C"}]})


def benchmark_of(db_url: str) -> dict:
    """Every question's full row as it matters to the benchmark, and every verdict."""
    with Store(db_url) as store:
        with store.engine.connect() as conn:
            verdicts = sorted(tuple(r) for r in conn.execute(sa.text(
                "SELECT subject_id, stage, rule, passed, reason FROM verdicts")))
        questions = sorted((q.id, q.status, tuple(q.options), q.answer) for q in store.get_questions())
    return {"questions": questions, "verdicts": verdicts}


def build(tmp_path, oracle_dir, name: str, seed: int, *, kill_after: int = 0) -> dict:
    workspace = tmp_path / name
    db_url = f"sqlite:///{workspace / 'benchsmith.db'}"
    with Store(db_url) as store:
        add_oracle(store, oracle_dir, SCENES)
    with ScriptedOpenAI(jittered(siblings_that_compete, base_s=0.1, jitter_s=0.4, seed=seed)) as server:
        env = generate_env(workspace, server.base_url) | {
            "BENCHSMITH__GENERATE__LLM__OPTIONS__CONCURRENCY": "8", "BENCHSMITH__GENERATE__QUALITY__MAX_PER_ITEM": "10"}
        generate = [BENCHSMITH, "generate", "--generator", "llm"]
        if kill_after:
            first = subprocess.Popen(generate, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
            deadline = time.time() + 120
            while server.calls < kill_after and time.time() < deadline and first.poll() is None:
                time.sleep(0.02)
            os.kill(first.pid, signal.SIGKILL)
            assert first.wait() == -signal.SIGKILL
        for command in (generate, [BENCHSMITH, "filter"]):
            done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
    return benchmark_of(db_url)


def test_the_same_answers_in_any_order_of_arrival_or_after_a_resume_give_the_same_benchmark(tmp_path, oracle_dir):
    first = build(tmp_path, oracle_dir, "first", seed=1)
    statuses = {status for _id, status, _options, _answer in first["questions"]}
    assert len(first["questions"]) == JOBS * 3 and {"candidate", "dropped"} <= statuses
    rules = {rule for _s, _stage, rule, _passed, _reason in first["verdicts"]}
    assert {"near_duplicate", "per_item_cap"} <= rules  # both sibling rules had to choose

    assert build(tmp_path, oracle_dir, "second", seed=2) == first
    assert build(tmp_path, oracle_dir, "resumed", seed=3, kill_after=JOBS // 2) == first
