"""The benchmark suite: every speed and memory target, one entry point, one JSON results file.

| case | what it measures                                           | target                          |
|------|------------------------------------------------------------|---------------------------------|
| P1   | generation concurrency (32 in flight, 500 ms server)       | >= 25x sequential               |
| P2   | rerun of a finished build                                  | 0 tokens, <= 0.10x first run    |
| B1   | the local build of 40 scenes, command by command           | >= 2 images/s                   |
| P3   | batched vs naive blind ranking, same choices               | >= 5x                           |
| P4   | `extract` with RapidOCR vs the raw backend loop            | <= 1.10x                        |
| P5   | pushing 10,000 review tasks to Label Studio                | <= 15 s                         |
| P6   | 100,000 candidates through the offline filter and publish  | peak RSS <= 2 GB                |
| E1   | `eval run` with a chat model (32 in flight, 500 ms server) | >= 25x sequential; rerun 0 calls|
| E2   | batched vs naive VLM likelihood ranking, same choices       | >= 5x                           |
| E3   | `eval run --candidates` peak RSS, 300 vs 3,000 candidates    | growth <= 1/4 of the image bytes|
| R1   | `generate -g reform` over 100,000 dataset annotations      | >= 2,000 q/s, RSS <= 1 GB, rerun adds 0 |
| S1   | `build` on 1 vs 2 Dask workers: RapidOCR, LLM at 500 ms     | ratios reported; 1M-image estimate |
| T1   | build over 300 mixed text-rich pages, blind filter, adversary | >= 250 kept per family, letters p > 0.05, adversary <= 28% (<= 35% per dimension) |
| M1   | 200 scene sets a seed: render, ingest, generate, blind filter, adversary | >= 250 kept per dimension 27-29, every key right, one image answers <= 5%, adversary <= 28% on >= 2,000 |

Also run: ingest throughput, OCR word accuracy, text-rich page rendering and reading, blind-filter leak catching, publish throughput, the cost of
the store-held LLM rate limit. Each case
runs in its own process (its memory and imports are its own); a failing case is recorded, not fatal.
Results: benchmarks/results/suite.json (each case also writes its own file).

    .venv/bin/python benchmarks/run_all.py                 # full sizes (an hour or more on 2 cores)
    .venv/bin/python benchmarks/run_all.py --quick         # small sizes, a few minutes
    .venv/bin/python benchmarks/run_all.py --only P1 P3    # some cases
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
RESULTS = HERE / "results"

# case -> (module, how its result says whether the target was met)
CASES = {
    "P1": ("generate_concurrency", lambda r: r["stage_speedup"] >= 25),
    "P1-cli": ("generate_cli", lambda r: r["speedup"] >= 25 and r["stage_times_physical_limit"] <= 1.4),
    "P1-conv": ("conversation_generate", lambda r: r["meets_target"]),
    "P2": ("build_rerun", lambda r: r["meets_target"]),
    "B1": ("local_build", lambda r: r["meets_target"]),
    "P3": ("blind_ranking", lambda r: r["meets_target"]),
    "P4": ("extract_overhead", lambda r: r["ratio_median"] <= 1.10),
    "P5": ("review_push", lambda r: r["within_target"]),
    "P6": ("filter_publish_memory", lambda r: r["meets_target"]),
    "E1": ("eval_api", lambda r: r["meets_target"]),
    "E2": ("eval_likelihood", lambda r: r["meets_target"]),
    "E3": ("eval_candidates_memory", lambda r: r["meets_target"]),
    "R1": ("reform_throughput", lambda r: r["meets_targets"]),
    "S1": ("distributed_scaling", lambda r: r["extract"]["same_rows"] and r["generate"]["same_rows"]),
    "ingest": ("ingest_throughput", lambda r: r["meets_target"]),
    "ocr": ("ocr_accuracy", lambda r: r["target_met"]),
    "detector": ("detector", lambda r: True),
    "textrich": ("textrich", lambda r: r["meets_target"]),
    "T1": ("textrich_build", lambda r: r["meets_targets"]),
    "M1": ("image_sets", lambda r: r["meets_targets"]),
    "leaks": ("blind_leaks", lambda r: r["meets_targets"]),
    "publish": ("publish_throughput", lambda r: True),
    "rate": ("rate_limit_overhead", lambda r: True),
}


def run_case(module: str, quick: bool) -> dict:
    command = [sys.executable, str(HERE / f"{module}.py"), *(["--quick"] if quick else [])]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = round(time.perf_counter() - started, 1)
    if done.returncode:
        return {"error": (done.stderr or done.stdout)[-2000:], "seconds": seconds}
    result = json.loads((RESULTS / f"{module}.json").read_text())
    return {"result": result, "seconds": seconds}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes for a fast check")
    parser.add_argument("--only", nargs="*", choices=list(CASES), help="run only these cases")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    suite = {"quick": args.quick, "cases": {}}
    for case in args.only or list(CASES):
        module, met = CASES[case]
        print(f"{case} ({module})...", flush=True)
        outcome = run_case(module, args.quick)
        if "result" in outcome:
            try:
                outcome["meets_target"] = bool(met(outcome["result"]))
            except KeyError as missing:
                outcome["meets_target"] = None
                outcome["note"] = f"result has no {missing}"
        suite["cases"][case] = outcome
        print(f"  {'met' if outcome.get('meets_target') else 'NOT met' if 'result' in outcome else 'failed'}"
              f" in {outcome['seconds']} s", flush=True)
        (RESULTS / "suite.json").write_text(json.dumps(suite, indent=2))
    print(json.dumps({case: o.get("meets_target") for case, o in suite["cases"].items()}, indent=2))
