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

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).parent / "results"
BENCHSMITH = str(Path(sys.executable).with_name("benchsmith"))
DIMENSIONS = 9  # the image dimensions with LLM prompt templates

from benchmarks.generate_concurrency import scripted_server  # noqa: E402
from benchmarks.user_env import user_env  # noqa: E402


def _cli(*args: str, cwd: Path, env: dict) -> tuple[float, str]:
    """The command's wall time and what it printed."""
    started = time.perf_counter()
    done = subprocess.run([BENCHSMITH, *args], cwd=cwd, env=env | {"COLUMNS": "200"}, capture_output=True,
                          text=True, timeout=1800)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"benchsmith {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return seconds, done.stdout


def _prepared(template: Path, scenes: int, env: dict) -> Path:
    """A workspace with `scenes` oracle scenes ingested and extracted, made once and copied per run."""
    if not (template / "bench").exists():
        template.mkdir(parents=True, exist_ok=True)
        _cli("scenes", "make", "--n", str(scenes), "--out", "scenes", cwd=template, env=env)
        _cli("ingest", "scenes/manifest.jsonl", cwd=template, env=env)
        _cli("extract", cwd=template, env=env)
    return template


def _generate_seconds(template: Path, workdir: Path, env: dict, concurrency: int) -> tuple[float, float]:
    """The command's wall time and the stage's own time, as the command reports it."""
    shutil.copytree(template, workdir)
    wall, printed = _cli("generate", "-g", "llm", cwd=workdir,
                         env=env | {"BENCHSMITH__GENERATE__LLM__OPTIONS__CONCURRENCY": str(concurrency)})
    stage = re.search(r"seconds\s*\S\s*([\d.]+)", printed)
    return wall, float(stage.group(1)) if stage else float("nan")


def run(scenes: int = 40, delay: float = 0.5, concurrency: int = 32, repeats: int = 3) -> dict:
    env = user_env("PREFECT_API")
    calls = scenes * DIMENSIONS
    concurrent: list[float] = []
    stage_only: list[float] = []
    with scripted_server(delay) as base_url, tempfile.TemporaryDirectory() as tmp:
        env |= {"OPENAI_BASE_URL": base_url}
        full = _prepared(Path(tmp) / "full", scenes, env)
        for repeat in range(repeats):
            wall, stage = _generate_seconds(full, Path(tmp) / f"run{repeat}", env, concurrency)
            concurrent.append(wall)
            stage_only.append(stage)
        tenth = max(1, scenes // 10)
        small = _prepared(Path(tmp) / "small", tenth, env)
        sequential_part, _stage = _generate_seconds(small, Path(tmp) / "sequential", env, 1)
    sequential = sequential_part * calls / (tenth * DIMENSIONS)
    median = statistics.median(concurrent)
    limit = calls * delay / concurrency
    result = {"scenes": scenes, "calls": calls, "server_delay_s": delay, "concurrency": concurrency,
              "repeats": repeats, "cli_seconds": [round(s, 2) for s in concurrent], "median_seconds": round(median, 2),
              "sequential_seconds_scaled": round(sequential, 1), "speedup": round(sequential / median, 1),
              "stage_seconds": [round(s, 2) for s in stage_only],
              "physical_limit_seconds": round(limit, 2),
              "command_times_physical_limit": round(median / limit, 2),
              "stage_times_physical_limit": round(statistics.median(stage_only) / limit, 2),
              "targets": {"speedup": 25.0, "stage_times_physical_limit": 1.4}}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "generate_cli.json").write_text(json.dumps(result, indent=2))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenes", type=int, default=40)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the server adds to every call")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="8 scenes, one repeat")
    args = parser.parse_args()
    scenes, repeats = (8, 1) if args.quick else (args.scenes, args.repeats)
    print(json.dumps(run(scenes, args.delay, args.concurrency, repeats), indent=2))


if __name__ == "__main__":
    main()
