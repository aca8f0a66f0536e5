"""LLM generation as a user runs it: `benchsmith generate -g llm` over oracle scenes, many calls in flight.

Workload (issue 11): 40 oracle scenes x 9 image dimensions = 360 LLM calls against the scripted
OpenAI-compatible server in its own process, answering each call after 500 ms, with 32 calls in flight.
Each timed run is the whole CLI command in a fresh workspace (ingest and extract done beforehand,
untimed), so process start-up, settings, the store, prompt building, the quality gate and the commits
are all inside the figure, with Python's bytecode cache on as in a user's install (`user_env`); the
stage's own time, as the command reports it, is recorded beside it. The
physical limit is calls x delay / concurrency; the sequential figure is the same command with one call
in flight, measured once on a tenth of the scenes and scaled by calls.
Targets: the command >= 25x sequential, and the stage within 1.4x the physical limit.
Results: benchmarks/results/generate_cli.json.

    .venv/bin/python benchmarks/generate_cli.py              # 40 scenes, 3 repeats
    .venv/bin/python benchmarks/generate_cli.py --quick      # 8 scenes, 1 repeat
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, cli, prepared, reported, save, scripted_server, user_env  # noqa: E402
from benchmarks.generate_concurrency import QUESTIONS  # noqa: E402

DIMENSIONS = 9  # the image dimensions with LLM prompt templates


def _generate_seconds(template: Path, workdir: Path, env: dict, concurrency: int) -> tuple[float, float]:
    """The command's wall time and the stage's own time, as the command reports it."""
    shutil.copytree(template, workdir)
    wall, printed = cli("generate", "-g", "llm", cwd=workdir,
                        env=env | {"BENCHSMITH__GENERATE__LLM__OPTIONS__CONCURRENCY": str(concurrency)})
    return wall, reported(printed, "seconds")


def run(scenes: int = 40, delay: float = 0.5, concurrency: int = 32, repeats: int = 3) -> dict:
    env = user_env("PREFECT_API")
    calls = scenes * DIMENSIONS
    with scripted_server(delay, QUESTIONS) as base_url, tempfile.TemporaryDirectory() as tmp:
        env |= {"OPENAI_BASE_URL": base_url}
        full = prepared(Path(tmp) / "full", scenes, env)
        concurrent, stage_only = zip(*[_generate_seconds(full, Path(tmp) / f"run{repeat}", env, concurrency)
                                       for repeat in range(repeats)])
        tenth = max(1, scenes // 10)
        small = prepared(Path(tmp) / "small", tenth, env)
        sequential_part, _stage = _generate_seconds(small, Path(tmp) / "sequential", env, 1)
    sequential = sequential_part * calls / (tenth * DIMENSIONS)
    median = statistics.median(concurrent)
    limit = calls * delay / concurrency
    return {"scenes": scenes, "calls": calls, "server_delay_s": delay, "concurrency": concurrency,
            "repeats": repeats, "cli_seconds": [round(s, 2) for s in concurrent], "median_seconds": round(median, 2),
            "sequential_seconds_scaled": round(sequential, 1), "speedup": round(sequential / median, 1),
            "stage_seconds": [round(s, 2) for s in stage_only],
            "physical_limit_seconds": round(limit, 2),
            "command_times_physical_limit": round(median / limit, 2),
            "stage_times_physical_limit": round(statistics.median(stage_only) / limit, 2),
            "targets": {"speedup": 25.0, "stage_times_physical_limit": 1.4}}


if __name__ == "__main__":
    args = arguments(__doc__, {"scenes": 8, "repeats": 1}, scenes=40, delay=0.5, concurrency=32, repeats=3).parse_args()
    save("generate_cli", run(args.scenes, args.delay, args.concurrency, args.repeats))
