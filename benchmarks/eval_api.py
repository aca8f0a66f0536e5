"""Black-box evaluation as a user runs it: `benchsmith eval run` with a chat model, many calls in flight.

Workload (issue 12): the candidates of 40 oracle scenes (about 620 questions; ingested, extracted and
generated beforehand, untimed) evaluated through the CLI by an `openai` model against the scripted
OpenAI-compatible server in its own process, which answers each call after 500 ms. Each timed run is
the whole command in a fresh copy of the workspace, so nothing comes from the call cache. The sequential figure is the same command
with one call in flight, measured once on an eighth of the passes and scaled. A rerun of a finished
evaluation is timed too, with the requests the server saw during it.
Targets: 32 in flight >= 25x sequential; a rerun sends 0 requests.
Results: benchmarks/results/eval_api.json.

    .venv/bin/python benchmarks/eval_api.py            # 600 passes, 3 repeats
    .venv/bin/python benchmarks/eval_api.py --quick    # 64 passes, 1 repeat
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import (arguments, cli, prepared, save, scripted_server, server_stats,  # noqa: E402
                               user_env)
from benchmarks.generate_concurrency import QUESTIONS  # noqa: E402


def run(passes: int, delay: float, concurrency: int, repeats: int, scenes: int) -> dict:
    env = user_env() | {"HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as tmp, scripted_server(delay, QUESTIONS) as base_url:
        env |= {"OPENAI_BASE_URL": base_url}
        template = prepared(Path(tmp) / "template", scenes, env, ["generate"])
        command = ["eval", "run", "-m", "vlm", "--candidates", "--limit"]

        def calls() -> int:
            return server_stats(base_url)["calls"]

        def fresh(name: str, in_flight: int) -> Path:
            folder = shutil.copytree(template, Path(tmp) / name)
            (folder / "benchsmith.yaml").write_text(yaml.safe_dump({"evaluate": {"window": 256, "models": {
                "vlm": {"kind": "openai", "model": "scripted-vl", "llm": {"concurrency": in_flight}}}}}))
            return folder

        sequential_passes = max(8, passes // 8)
        before = calls()
        sequential, _ = cli(*command, str(sequential_passes), cwd=fresh("sequential", 1), env=env)
        assert calls() - before == sequential_passes
        concurrent = []
        for k in range(repeats):
            folder = fresh(f"concurrent{k}", concurrency)
            before = calls()
            seconds, out = cli(*command, str(passes), cwd=folder, env=env)
            assert calls() - before == passes, out
            concurrent.append(seconds)
        everything = command[:-1]
        cli(*everything, cwd=folder, env=env)                  # finish every pass of the candidates
        before = calls()
        rerun, _ = cli(*everything, cwd=folder, env=env)
        rerun_requests = calls() - before
    sequential_scaled = sequential * passes / sequential_passes
    median = statistics.median(concurrent)
    result = {"passes": passes, "delay_s": delay, "concurrency": concurrency, "repeats": repeats,
              "concurrent_s": [round(s, 2) for s in concurrent], "concurrent_median_s": round(median, 2),
              "sequential_s_measured": round(sequential, 2), "sequential_passes": sequential_passes,
              "sequential_s_scaled": round(sequential_scaled, 2), "speedup": round(sequential_scaled / median, 1),
              "physical_limit_s": round(passes * delay / concurrency, 2),
              "rerun_s": round(rerun, 2), "rerun_requests": rerun_requests}
    result["meets_target"] = result["speedup"] >= 25 and rerun_requests == 0
    return result


if __name__ == "__main__":
    args = arguments(__doc__, {"passes": 64, "repeats": 1, "scenes": 10},
                     passes=600, delay=0.5, concurrency=32, repeats=3, scenes=40).parse_args()
    save("eval_api", run(args.passes, args.delay, args.concurrency, args.repeats, args.scenes))
