"""`benchsmith generate -g llm` and `benchsmith filter` with `generate.llm.options.mode: batch`, against the
scripted server's Batch API: the same answers give the same benchmark as live mode, and a run killed at
any point of a batch's life finishes on rerun with every request paid for once."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from benchsmith.store import Store
from tests.generators.test_reproducible import benchmark_of, siblings_that_compete
from tests.generators.test_resume import BENCHSMITH, generate_env
from tests.generators.test_stage import add_oracle
from tests.support.openai_server import Reply, ScriptedOpenAI, chat_completion, error

SCENES = 40


def benchsmith(env: dict, *args: str, running: list | None = None) -> subprocess.CompletedProcess:
    """Run a command to its end (killed or not); `running` hears its process while it runs."""
    process = subprocess.Popen([BENCHSMITH, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    if running is not None:
        running[:] = [process]
    out, _ = process.communicate(timeout=300)
    return subprocess.CompletedProcess(process.args, process.returncode, out)


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stdout
    return done.stdout


def workspace_with_scenes(tmp_path, oracle_dir, name: str, scenes: int):
    workspace = tmp_path / name
    with Store(f"sqlite:///{workspace / 'benchsmith.db'}") as store:
        add_oracle(store, oracle_dir, scenes)
    return workspace


def env_for(workspace, server, mode: str) -> dict:
    return generate_env(workspace, server.base_url) | {
        "BENCHSMITH__GENERATE__LLM__OPTIONS__MODE": mode, "BENCHSMITH__GENERATE__QUALITY__MAX_PER_ITEM": "10"}


@pytest.mark.slow(seconds=145)
def test_batch_mode_builds_the_same_benchmark_as_live_mode_at_half_the_price(tmp_path, oracle_dir):
    results = {}
    for mode in ("live", "batch"):
        workspace = workspace_with_scenes(tmp_path, oracle_dir, mode, SCENES)
        with ScriptedOpenAI(siblings_that_compete) as server:
            server.batch_delay_s = 1.0  # the job is still running when the first generate returns
            env = env_for(workspace, server, mode)
            first = ok(benchsmith(env, "generate", "-g", "llm"))
            if mode == "batch":
                assert "waiting for an LLM batch job" in first and not server.completions
                assert "LLM batch jobs" in ok(benchsmith(env, "status"))
                ok(benchsmith(env, "llm", "batches", "collect", "--wait", "--poll-s", "0.1"))
                ok(benchsmith(env, "generate", "-g", "llm"))
            ok(benchsmith(env, "filter"))
            assert set(server.completions.values()) == {1}
        db_url = f"sqlite:///{workspace / 'benchsmith.db'}"
        with Store(db_url) as store:
            results[mode] = benchmark_of(db_url), sum(v["cost_usd"] for v in store.llm_totals().values())
    (live, live_cost), (batch, batch_cost) = results["live"], results["batch"]
    assert len(live["questions"]) == SCENES * 9 * 3 and batch == live
    assert batch_cost == pytest.approx(live_cost / 2) and live_cost > 0


# Where the command is killed: at the first Batch API call whose path ends so, before the server does it
# (at upload: the file never arrives) or after, before it answers. The server's jobs end on its own clock,
# one second after creation, so a job left behind may have ended before the next command looks.
KILLS = {"at upload": ("generate", "POST", "/files", "before"),
         "after upload": ("generate", "POST", "/files", "after"),
         "after job creation": ("generate", "POST", "/batches", "after"),
         "while waiting": ("collect", "GET", "/batches/batch_1", "after"),
         "while collecting": ("collect", "GET", "/content", "after")}


@pytest.mark.parametrize("kill", KILLS)
def test_a_run_killed_at_any_point_of_a_batch_finishes_on_rerun_paying_each_request_once(tmp_path, oracle_dir, kill):
    command, method, path, when = KILLS[kill]
    workspace = workspace_with_scenes(tmp_path, oracle_dir, "bench", 3)
    running: list = []
    killed: list = []

    def kill_there(called_method: str, called_path: str) -> Reply | None:
        if called_method == method and called_path.endswith(path) and not killed:
            killed.append(called_path)
            os.kill(running[0].pid, signal.SIGKILL)
            return error(503, "lost on the way") if when == "before" else None
        return None

    with ScriptedOpenAI(siblings_that_compete) as server:
        setattr(server, "on_batch_request" if when == "before" else "on_batch_call", kill_there)
        server.batch_delay_s = 1.0
        env = env_for(workspace, server, "batch")
        steps = [("generate", "-g", "llm"), ("llm", "batches", "collect", "--wait", "--poll-s", "0.2")] * 2
        outcomes = [benchsmith(env, *step, running=running).returncode for step in steps]
        ok(benchsmith(env, "generate", "-g", "llm"))
        uploads = [f for f in server.files.values() if f["meta"]["purpose"] == "batch"]

    assert killed and outcomes.count(-signal.SIGKILL) == 1
    assert steps[outcomes.index(-signal.SIGKILL)][0 if command == "generate" else 2] == command
    assert set(server.completions.values()) == {1} and len(server.completions) == 3 * 9
    # one file and job per model (visual reasoning asks gpt-4o), none uploaded twice, no request in two
    assert len(uploads) == len(server.jobs) == 2
    assert sum(f["data"].count(b"\n") for f in uploads) == 3 * 9
    with Store(f"sqlite:///{workspace / 'benchsmith.db'}") as store:
        done = store.ledger_rows("generate:llm")
        jobs, paid = store.get_llm_batches(), sum(v["cost_usd"] for v in store.llm_totals().values())
    assert len(done) == 3 * 9 and {r["status"] for r in done} == {"done"}
    # every job ends collected, but one the provider never got (abandoned, at no cost); the bill is half
    # of what the same answers cost live, and the jobs' costs add up to it
    collected = [j for j in jobs if j["status"] == "collected"]
    assert len(collected) == 2 and all(j["status"] == "abandoned" and j["cost_usd"] == j["live_cost_usd"] == 0
                                       for j in jobs if j not in collected)
    assert len(jobs) == (3 if kill == "at upload" else 2) and paid > 0
    assert sum(j["cost_usd"] for j in jobs) == pytest.approx(paid)
    assert sum(j["live_cost_usd"] for j in jobs) == pytest.approx(2 * paid)


def letter_by_content(request: dict):
    """A blind solver's reply that depends only on what it is asked: the same in both modes."""
    text = request["messages"][-1]["content"]
    return chat_completion("ABCD"[sum(map(ord, text)) % 4])


def test_the_blind_filters_chat_solver_judges_the_same_in_batch_mode_as_live(tmp_path, oracle_dir):
    verdicts = {}
    for mode in ("live", "batch"):
        workspace = workspace_with_scenes(tmp_path, oracle_dir, mode, 3)
        with ScriptedOpenAI(letter_by_content) as server:
            env = generate_env(workspace, server.base_url) | {
                "BENCHSMITH__FILTER__BLIND__SOLVERS": f"[{{kind: openai, model: scripted, llm: {{mode: {mode}}}}}]"}
            ok(benchsmith(env, "generate", "-g", "programmatic"))
            ok(benchsmith(env, "filter"))
            if mode == "batch":
                assert not server.completions  # nothing asked live: every request waits in a batch job
                ok(benchsmith(env, "llm", "batches", "collect", "--wait", "--poll-s", "0.1"))
                ok(benchsmith(env, "filter"))
            assert server.completions and set(server.completions.values()) == {1}
        with Store(f"sqlite:///{workspace / 'benchsmith.db'}") as store:
            verdicts[mode] = sorted((v.subject_id, v.passed, v.reason) for v in store.get_verdicts(stage="blind"))
    assert verdicts["batch"] == verdicts["live"] and len(verdicts["live"]) > 10
