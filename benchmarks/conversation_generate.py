"""Conversation generation as a user runs it: `benchsmith generate -g conversation` over oracle scenes.

Workload (issue 16): 40 oracle scenes, one three-turn conversation each = 120 LLM calls against the
scripted OpenAI-compatible server in its own process, answering each call after 500 ms, 32 calls in
flight. The turns of one image are sequential (turn 2 needs turn 1), so the calls go out in three waves;
the physical limit is 3 waves x ceil(scenes / concurrency) x delay. Each timed run is the whole CLI
command in a fresh copy of a workspace whose scenes are ingested and extracted (untimed). The rerun is
the same command again on the finished workspace: it must send no request.
Targets: the stage within 2x the physical limit, and the rerun sends 0 requests.
Results: benchmarks/results/conversation_generate.json.

    .venv/bin/python benchmarks/conversation_generate.py            # 40 scenes, 3 repeats
    .venv/bin/python benchmarks/conversation_generate.py --quick    # 8 scenes, 1 repeat
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).parent / "results"
BENCHSMITH = str(Path(sys.executable).with_name("benchsmith"))
TURN = json.dumps({"task": "scene description", "instruction": "Tell me what stands out in this picture.",
                   "reference": "A reference answer written for the benchmark.",
                   "focus_points": ["names the main shapes"]})

from benchmarks.generate_cli import _cli, _prepared  # noqa: E402
from benchmarks.user_env import user_env  # noqa: E402


@contextmanager
def scripted_server(delay: float):
    server = subprocess.Popen([sys.executable, "-m", "tests.support.openai_server", "--delay", str(delay),
                               "--content", TURN], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        yield server.stdout.readline().strip()
    finally:
        server.terminate()
        server.wait(timeout=10)


def _requests(base_url: str) -> int:
    import httpx

    return httpx.get(base_url + "/_stats").json()["calls"]


def _row(printed: str, name: str) -> float:
    found = re.search(rf"{name}\s*\S\s*([\d.]+)", printed)
    return float(found.group(1)) if found else float("nan")


def run(scenes: int = 40, delay: float = 0.5, concurrency: int = 32, repeats: int = 3) -> dict:
    env = user_env("PREFECT_API")
    env |= {"BENCHSMITH__GENERATE__CONVERSATION__OPTIONS__CONCURRENCY": str(concurrency)}
    walls, stages, rerun_walls, rerun_requests, kept = [], [], [], [], []
    with scripted_server(delay) as base_url, tempfile.TemporaryDirectory() as tmp:
        env |= {"OPENAI_BASE_URL": base_url}
        template = _prepared(Path(tmp) / "template", scenes, env)
        for repeat in range(repeats):
            workdir = Path(tmp) / f"run{repeat}"
            shutil.copytree(template, workdir)
            wall, printed = _cli("generate", "-g", "conversation", cwd=workdir, env=env)
            walls.append(wall)
            stages.append(_row(printed, "seconds"))
            kept.append(_row(printed, "conversations_kept"))
            before = _requests(base_url)
            started = time.perf_counter()
            _cli("generate", "-g", "conversation", cwd=workdir, env=env)
            rerun_walls.append(time.perf_counter() - started)
            rerun_requests.append(_requests(base_url) - before)
    limit = 3 * math.ceil(scenes / concurrency) * delay
    result = {"scenes": scenes, "calls": 3 * scenes, "server_delay_s": delay, "concurrency": concurrency,
              "repeats": repeats, "conversations_kept": kept, "cli_seconds": [round(s, 2) for s in walls],
              "median_cli_seconds": round(statistics.median(walls), 2),
              "stage_seconds": stages, "median_stage_seconds": round(statistics.median(stages), 2),
              "physical_limit_seconds": limit, "sequential_seconds": 3 * scenes * delay,
              "stage_times_physical_limit": round(statistics.median(stages) / limit, 2),
              "rerun_cli_seconds": [round(s, 2) for s in rerun_walls], "rerun_requests": rerun_requests}
    result["meets_target"] = result["stage_times_physical_limit"] <= 2.0 and not any(rerun_requests)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "conversation_generate.json").write_text(json.dumps(result, indent=2))
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
