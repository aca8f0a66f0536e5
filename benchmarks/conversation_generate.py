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

import json
import math
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import (arguments, cli, prepared, reported, save, scripted_server,  # noqa: E402
                               server_stats, user_env)

TURN = json.dumps({"task": "scene description", "instruction": "Tell me what stands out in this picture.",
                   "reference": "A reference answer written for the benchmark.",
                   "focus_points": ["names the main shapes"]})


def run(scenes: int = 40, delay: float = 0.5, concurrency: int = 32, repeats: int = 3) -> dict:
    env = user_env("PREFECT_API") | {"BENCHSMITH__GENERATE__CONVERSATION__OPTIONS__CONCURRENCY": str(concurrency)}
    walls, stages, rerun_walls, rerun_requests, kept = [], [], [], [], []
    with scripted_server(delay, TURN) as base_url, tempfile.TemporaryDirectory() as tmp:
        env |= {"OPENAI_BASE_URL": base_url}
        template = prepared(Path(tmp) / "template", scenes, env)
        for repeat in range(repeats):
            workdir = shutil.copytree(template, Path(tmp) / f"run{repeat}")
            wall, printed = cli("generate", "-g", "conversation", cwd=workdir, env=env)
            walls.append(wall)
            stages.append(reported(printed, "seconds"))
            kept.append(reported(printed, "conversations_kept"))
            before = server_stats(base_url)["calls"]
            rerun_walls.append(cli("generate", "-g", "conversation", cwd=workdir, env=env)[0])
            rerun_requests.append(server_stats(base_url)["calls"] - before)
    limit = 3 * math.ceil(scenes / concurrency) * delay
    result = {"scenes": scenes, "calls": 3 * scenes, "server_delay_s": delay, "concurrency": concurrency,
              "repeats": repeats, "conversations_kept": kept, "cli_seconds": [round(s, 2) for s in walls],
              "median_cli_seconds": round(statistics.median(walls), 2),
              "stage_seconds": stages, "median_stage_seconds": round(statistics.median(stages), 2),
              "physical_limit_seconds": limit, "sequential_seconds": 3 * scenes * delay,
              "stage_times_physical_limit": round(statistics.median(stages) / limit, 2),
              "rerun_cli_seconds": [round(s, 2) for s in rerun_walls], "rerun_requests": rerun_requests}
    result["meets_target"] = result["stage_times_physical_limit"] <= 2.0 and not any(rerun_requests)
    return result


if __name__ == "__main__":
    args = arguments(__doc__, {"scenes": 8, "repeats": 1}, scenes=40, delay=0.5, concurrency=32, repeats=3).parse_args()
    save("conversation_generate", run(args.scenes, args.delay, args.concurrency, args.repeats))
