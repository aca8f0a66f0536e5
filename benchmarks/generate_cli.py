"""LLM generation as a user runs it: `benchsmith generate -g llm` over oracle scenes, many calls in flight.

Workload (issue 11): 40 oracle scenes x 9 image dimensions = 360 LLM calls against the scripted
OpenAI-compatible server in its own process, answering each call after 500 ms, with 32 calls in flight.
Each timed run is the whole CLI command in a fresh workspace (ingest and extract done beforehand,
untimed), so process start-up, settings, the store, prompt building, the quality gate and the commits
are all inside the figure, with Python's bytecode cache on as in a user's install (`user_env`); the
stage's own time, as the command reports it, is recorded beside it, and the server's clock splits the
command into three phases: until the first call arrives (interpreter, settings, store, prompts, client
set-up), from it to the last answer, and after it (last commits, exit). The physical limit is calls x
delay / concurrency; calls of equal latency go out in waves, so the calls alone take at least
ceil(calls / concurrency) x delay (the wave floor; `share_of_physical_limit_at_best`: a command
that did nothing but its calls). The sequential figure is the same command with one call
in flight, measured once on a tenth of the scenes and scaled by calls.
Targets: the command >= 25x sequential, the stage within 1.4x the physical limit, and (issue 49) the
command at 90% of the physical limit or more (`share_of_physical_limit`).
Results: benchmarks/results/generate_cli.json.

    .venv/bin/python benchmarks/generate_cli.py              # 40 scenes, 3 repeats
    .venv/bin/python benchmarks/generate_cli.py --quick      # 8 scenes, 1 repeat
"""

from __future__ import annotations

import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import (arguments, cli, prepared, reported, save, scripted_server, server_stats,  # noqa: E402
                               user_env)
from benchmarks.generate_concurrency import QUESTIONS  # noqa: E402

DIMENSIONS = 9  # the image dimensions with LLM prompt templates


PHASES = ("before_first_call", "calls", "after_last_answer")


def _generate_seconds(template: Path, workdir: Path, env: dict, concurrency: int, base_url: str) -> dict[str, float]:
    """The command's wall time, the stage's own time as the command reports it, and the command's phases
    by the server's clock (`PHASES`)."""
    shutil.copytree(template, workdir)
    started = time.time()
    wall, printed = cli("generate", "-g", "llm", cwd=workdir,
                        env=env | {"BENCHSMITH__GENERATE__LLM__OPTIONS__CONCURRENCY": str(concurrency)})
    calls = server_stats(base_url, since=started)
    first, last = calls["first_call_at"], calls["last_answer_at"]
    return {"wall": wall, "stage": reported(printed, "seconds"), "before_first_call": first - started,
            "calls": last - first, "after_last_answer": started + wall - last}


def run(scenes: int = 40, delay: float = 0.5, concurrency: int = 32, repeats: int = 3) -> dict:
    env = user_env("PREFECT_API")
    calls = scenes * DIMENSIONS
    with scripted_server(delay, QUESTIONS) as base_url, tempfile.TemporaryDirectory() as tmp:
        env |= {"OPENAI_BASE_URL": base_url}
        full = prepared(Path(tmp) / "full", scenes, env)
        runs = [_generate_seconds(full, Path(tmp) / f"run{repeat}", env, concurrency, base_url)
                for repeat in range(repeats)]
        tenth = max(1, scenes // 10)
        small = prepared(Path(tmp) / "small", tenth, env)
        sequential_part = _generate_seconds(small, Path(tmp) / "sequential", env, 1, base_url)["wall"]
    concurrent, stage_only = [run["wall"] for run in runs], [run["stage"] for run in runs]
    sequential = sequential_part * calls / (tenth * DIMENSIONS)
    median = statistics.median(concurrent)
    limit = calls * delay / concurrency
    floor = math.ceil(calls / concurrency) * delay
    return {"scenes": scenes, "calls": calls, "server_delay_s": delay, "concurrency": concurrency,
            "repeats": repeats, "cli_seconds": [round(s, 2) for s in concurrent], "median_seconds": round(median, 2),
            "sequential_seconds_scaled": round(sequential, 1), "speedup": round(sequential / median, 1),
            "stage_seconds": [round(s, 2) for s in stage_only],
            "physical_limit_seconds": round(limit, 2),
            "command_times_physical_limit": round(median / limit, 2),
            "stage_times_physical_limit": round(statistics.median(stage_only) / limit, 2),
            "share_of_physical_limit": round(limit / median, 3),
            "wave_floor_seconds": floor, "share_of_physical_limit_at_best": round(limit / floor, 3),
            "phases_median_seconds": {p: round(statistics.median(run[p] for run in runs), 2) for p in PHASES},
            "phases_seconds": {p: [round(run[p], 2) for run in runs] for p in PHASES},
            "calls_times_wave_floor": round(statistics.median(run["calls"] for run in runs) / floor, 2),
            "targets": {"speedup": 25.0, "stage_times_physical_limit": 1.4, "share_of_physical_limit": 0.9}}


if __name__ == "__main__":
    args = arguments(__doc__, {"scenes": 8, "repeats": 1}, scenes=40, delay=0.5, concurrency=32, repeats=3).parse_args()
    save("generate_cli", run(args.scenes, args.delay, args.concurrency, args.repeats))
