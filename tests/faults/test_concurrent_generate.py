"""Two `benchsmith generate -g llm` processes at once on one store: no prompt is ever paid for twice."""

from __future__ import annotations

import os
import socket
import subprocess
from collections import Counter

import sqlalchemy as sa

from benchsmith.llm import owner_gone
from benchsmith.store import Store
from benchsmith.store.schema import llm_calls
from tests.generators.test_resume import BENCHSMITH, generate_env, key_of, two_questions
from tests.generators.test_stage import add_oracle
from tests.support.openai_server import ScriptedOpenAI


def test_two_generate_runs_at_once_split_the_prompts_and_pay_each_once(tmp_path, oracle_dir):
    workspace = tmp_path / "bench"
    db_url = f"sqlite:///{workspace / 'benchsmith.db'}"
    with Store(db_url) as store:
        add_oracle(store, oracle_dir, 6)
    jobs = 6 * 9
    with ScriptedOpenAI(two_questions) as server:
        env = generate_env(workspace, server.base_url)
        command = [BENCHSMITH, "generate", "--generator", "llm"]
        runs = [subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True) for _ in range(2)]
        outputs = [run.communicate(timeout=300)[0] for run in runs]
        assert [run.returncode for run in runs] == [0, 0], outputs
        sent = Counter(key_of(body) for body in server.requests)

    assert len(sent) == jobs and max(sent.values()) == 1, f"{server.calls} requests for {jobs} prompts"
    with Store(db_url) as store:
        with store.engine.connect() as conn:
            statuses = Counter(conn.scalars(sa.select(llm_calls.c.status)))
        questions = store.get_questions()
    assert statuses == {"ok": jobs}  # the ledger holds every paid call, and no claim is left behind
    assert len(questions) == len({q.id for q in questions})


def test_a_claim_is_held_against_others_until_it_goes_stale(store):
    row = {"key": "k1", "purpose": "generate", "model": "m", "request": {"messages": []}}
    assert store.claim_llm_calls([row], "in flight: a", stale_after_s=60) == {"k1"}
    assert store.claim_llm_calls([row], "in flight: b", stale_after_s=60) == set()
    assert store.claim_llm_calls([row], "in flight: b", stale_after_s=0) == {"k1"}  # a died: b takes over
    store.put_llm_calls([{"key": "k1", "purpose": "generate", "model": "m", "request": {}, "response": None,
                          "status": "error", "error": "HTTP 500", "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0,
                          "seconds": 0.1}])
    assert store.claim_llm_calls([row], "in flight: a", stale_after_s=60) == {"k1"}  # a failed call is retried
    gone = subprocess.Popen(["true"])
    gone.wait()  # a process of this machine that has ended
    dead = f"in flight: {socket.gethostname()}:{gone.pid}:x"
    assert owner_gone(dead) and not owner_gone("in flight: a") and not owner_gone(
        f"in flight: {socket.gethostname()}:{os.getpid()}:y")
    assert store.claim_llm_calls([row], "in flight: b", stale_after_s=60, dead_owners=[dead]) == set()  # a's
    store.put_llm_calls([{"key": "k1", "purpose": "generate", "model": "m", "request": {}, "response": None,
                          "status": "in_flight", "error": dead, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0,
                          "seconds": 0.0}])
    assert store.claim_llm_calls([row], "in flight: b", stale_after_s=60) == set()
    assert store.claim_llm_calls([row], "in flight: b", stale_after_s=60, dead_owners=[dead]) == {"k1"}
