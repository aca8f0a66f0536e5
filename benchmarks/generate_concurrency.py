"""How much faster is LLM generation with many calls in flight than one call at a time?

Target (issue 4): with the scripted OpenAI-compatible server adding 500 ms to every call, 32 calls in
flight make generation >= 25x faster than a sequential run of the same work. Both runs go through the
whole generate stage (prompt building, HTTP, schema checks, quality gate, store writes) on fresh
stores, so nothing is served from the call cache; each mode is timed `repeats` times and the ratio of
the medians is reported. The same is measured for the bare LLM client, without the stage around it.
Results: benchmarks/results/generate_concurrency.json.

    .venv/bin/python benchmarks/generate_concurrency.py            # 32 calls at 500 ms, 3 repeats
    .venv/bin/python benchmarks/generate_concurrency.py --quick    # 16 calls at 200 ms, 1 repeat
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import (add_captioned_images, arguments, save, scripted_server, server_stats,  # noqa: E402
                               timed)

QUESTIONS = json.dumps({"questions": [
    {"question": "How many shapes are there in the drawing?", "options": ["2", "3", "4", "5"], "answer": "B"}]})


def _stage_seconds(base_url: str, calls: int, concurrency: int, workdir: Path) -> float:
    from benchsmith.settings import load_settings
    from benchsmith.store import Store
    from benchsmith import runner
    from generators.stage import build_stages, run_stages

    settings = load_settings(env={
        "BENCHSMITH_WORKSPACE": str(workdir), "OPENAI_BASE_URL": base_url,
        "BENCHSMITH__GENERATE__DIMENSIONS": "[instances_counting]",
        "BENCHSMITH__GENERATE__LLM__BATCH_SIZE": str(calls),
        "BENCHSMITH__GENERATE__LLM__OPTIONS__CONCURRENCY": str(concurrency)})
    with Store(settings.db_url) as store:
        add_captioned_images(store, calls + 1)  # an image with no facts would wait for extraction
        stages = build_stages(settings, generators=["llm"])
        assert len(runner.pending(stages[0], store)) == calls + 1
        # One job first, untimed, in both modes: it pays the once-per-process costs (SQL statement
        # compilation on a new engine, client set-up) that a long generation run pays only once.
        run_stages(store, stages, limit=1)
        seconds, report = timed(lambda: run_stages(store, build_stages(settings, generators=["llm"])))
    assert report["kept"] == calls, report
    return seconds


def _client_seconds(base_url: str, calls: int, concurrency: int) -> float:
    from benchsmith.llm import LlmClient, LlmOptions, LlmRequest
    from benchsmith.settings import load_settings

    settings = load_settings(env={"BENCHSMITH_WORKSPACE": tempfile.mkdtemp(), "OPENAI_BASE_URL": base_url})
    requests = [LlmRequest(purpose="generate", model="m", messages=[
        {"role": "system", "content": "s"}, {"role": "user", "content": f"question {i}"}]) for i in range(calls)]
    client = LlmClient(settings, LlmOptions(concurrency=concurrency))
    seconds, results = timed(lambda: client.run(requests))
    assert all(r.ok for r in results)
    return seconds


def run(calls: int = 32, delay: float = 0.5, concurrency: int = 32, repeats: int = 3, quick: bool = False) -> dict:
    concurrency = min(concurrency, calls)
    timings: dict[str, list[float]] = {"stage_sequential": [], "stage_concurrent": [],
                                       "client_sequential": [], "client_concurrent": []}
    with scripted_server(delay, QUESTIONS) as base_url, tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            for mode, width in (("sequential", 1), ("concurrent", concurrency)):
                workdir = Path(tmp) / f"{mode}-{repeat}"
                timings[f"stage_{mode}"].append(_stage_seconds(base_url, calls, width, workdir))
                timings[f"client_{mode}"].append(_client_seconds(base_url, calls, width))
        max_in_flight = server_stats(base_url)["max_in_flight"]
    medians = {name: statistics.median(values) for name, values in timings.items()}
    result = {"calls": calls, "server_delay_s": delay, "concurrency": concurrency, "repeats": repeats,
              "median_seconds": {k: round(v, 3) for k, v in medians.items()},
              "all_seconds": {k: [round(v, 3) for v in values] for k, values in timings.items()},
              "stage_speedup": round(medians["stage_sequential"] / medians["stage_concurrent"], 2),
              "client_speedup": round(medians["client_sequential"] / medians["client_concurrent"], 2),
              "server_max_in_flight": max_in_flight, "target_speedup": 25.0}
    result["meets_target"] = result["stage_speedup"] >= 25.0 if not quick else None
    return result


if __name__ == "__main__":
    args = arguments(__doc__, {"calls": 16, "delay": 0.2, "repeats": 1},
                     calls=32, delay=0.5, concurrency=32, repeats=3).parse_args()
    save("generate_concurrency", run(args.calls, args.delay, args.concurrency, args.repeats, args.quick))
