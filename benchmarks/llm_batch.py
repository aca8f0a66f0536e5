"""What batch mode (`llm.options.mode: batch`) costs and how long submitting takes.

1. Cost per kept question, batch against live: the same oracle scenes go through `benchsmith generate -g
   llm` and `benchsmith filter` once per mode against the scripted server (same answers, same recorded
   token counts), priced by the price table in settings (`generate.llm.options.prices`, `batch_factor`).
   Expected: batch costs half as much per kept question, for the same questions.
2. The wall time of submitting `--requests` requests (default 100,000) in batch mode: the client queues
   them (one call-cache lookup per request), then the batch files are written, uploaded to the scripted
   server (`/v1/files`, `/v1/batches`) and recorded in a SQLite store.

Results: benchmarks/results/llm_batch.json.

    .venv/bin/python benchmarks/llm_batch.py                 # 8 scenes, 100,000 requests
    .venv/bin/python benchmarks/llm_batch.py --quick         # 2 scenes, 10,000 requests
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, cli, save, user_env  # noqa: E402


def cost_per_kept_question(scenes: int, workdir: Path) -> dict:
    from benchsmith.store import Store
    from ingest.scenes import make_scenes
    from tests.generators.test_reproducible import siblings_that_compete
    from tests.generators.test_stage import add_oracle
    from tests.support.openai_server import ScriptedOpenAI

    oracle = workdir / "oracle"
    make_scenes(oracle, scenes, seed=7)
    out = {}
    for mode in ("live", "batch"):
        workspace = workdir / mode
        db_url = f"sqlite:///{workspace / 'benchsmith.db'}"
        with Store(db_url) as store:
            add_oracle(store, oracle, scenes)
        steps = [["generate", "-g", "llm"], ["filter"]]
        if mode == "batch":
            steps[1:1] = [["llm", "batches", "collect", "--wait", "--poll-s", "0.1"], ["generate", "-g", "llm"]]
        with ScriptedOpenAI(siblings_that_compete) as server:
            env = user_env("OPENAI") | {
                "BENCHSMITH_WORKSPACE": str(workspace), "OPENAI_BASE_URL": server.base_url,
                "BENCHSMITH__GENERATE__LLM__OPTIONS__MODE": mode}
            started = time.perf_counter()
            for step in steps:
                cli(*step, cwd=workdir, env=env)
            seconds = time.perf_counter() - started
        with Store(db_url) as store:
            totals = store.llm_totals().values()
            kept = sum(1 for q in store.get_questions() if q.status == "candidate")
            questions = sorted((q.id, q.status, q.answer) for q in store.get_questions())
        cost = sum(t["cost_usd"] for t in totals)
        out[mode] = {"calls": sum(t["calls"] for t in totals), "tokens_in": sum(t["tokens_in"] for t in totals),
                     "tokens_out": sum(t["tokens_out"] for t in totals), "cost_usd": round(cost, 6),
                     "kept_questions": kept, "cost_per_kept_question_usd": cost / kept if kept else None,
                     "seconds": round(seconds, 1), "_questions": questions}
    same = out["live"].pop("_questions") == out["batch"].pop("_questions")
    ratio = out["batch"]["cost_per_kept_question_usd"] / out["live"]["cost_per_kept_question_usd"]
    return {"scenes": scenes, **out, "same_questions": same, "batch_over_live": round(ratio, 4)}


def submit_seconds(n: int, workdir: Path) -> dict:
    from benchsmith import llm_batch
    from benchsmith.llm import LlmClient, LlmOptions, LlmRequest
    from benchsmith.settings import load_settings
    from benchsmith.store import Store
    from tests.support.openai_server import ScriptedOpenAI

    facts = "A red circle left of a blue square; the text 'SALE' on a sign. " * 4
    requests = [LlmRequest(purpose="generate", model="gpt-4o-mini", temperature=0.7, seed=0, max_tokens=1500,
                           messages=[{"role": "system", "content": "Write three questions as JSON."},
                                     {"role": "user", "content": f"Dimension: scene. <image_facts>{facts} #{i}"}])
                for i in range(n)]
    with ScriptedOpenAI() as server, Store(f"sqlite:///{workdir / 'submit.db'}") as store:
        settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(workdir), "OPENAI_BASE_URL": server.base_url})
        client = LlmClient(settings, LlmOptions(mode="batch"), store)
        started = time.perf_counter()
        client.run(requests)
        queued = time.perf_counter()
        llm_batch.submit_queued()
        done = time.perf_counter()
        uploaded = sum(f["meta"]["bytes"] for f in server.files.values())
        jobs = store.get_llm_batches()
    return {"requests": n, "jobs": len(jobs), "recorded_requests": sum(j["requests"] for j in jobs),
            "uploaded_mb": round(uploaded / 1e6, 1), "queue_seconds": round(queued - started, 2),
            "submit_seconds": round(done - queued, 2), "total_seconds": round(done - started, 2)}


if __name__ == "__main__":
    args = arguments(__doc__, {"scenes": 2, "requests": 10_000}, scenes=8, requests=100_000).parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        save("llm_batch", {"cost": cost_per_kept_question(args.scenes, Path(tmp)),
                           "submit": submit_seconds(args.requests, Path(tmp))})
