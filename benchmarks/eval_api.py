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

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).parent / "results"

from benchmarks.generate_cli import _cli  # noqa: E402
from benchmarks.generate_concurrency import scripted_server  # noqa: E402
from benchmarks.user_env import user_env  # noqa: E402


def _workspace(folder: Path, scenes: int, env: dict) -> None:
    folder.mkdir(parents=True)
    _cli("scenes", "make", "--n", str(scenes), "--out", "scenes", cwd=folder, env=env)
    _cli("ingest", "scenes/manifest.jsonl", cwd=folder, env=env)
    _cli("extract", cwd=folder, env=env)
    _cli("generate", cwd=folder, env=env)


def _settings(folder: Path, concurrency: int) -> None:
    (folder / "benchsmith.yaml").write_text(yaml.safe_dump({"evaluate": {"window": 256, "models": {
        "vlm": {"kind": "openai", "model": "scripted-vl", "llm": {"concurrency": concurrency}}}}}))


def _calls(base_url: str) -> int:
    return httpx.get(base_url.rstrip("/") + "/_stats").json()["calls"]


def run(passes: int, delay: float, concurrency: int, repeats: int, scenes: int) -> dict:
    env = user_env() | {"HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as tmp, scripted_server(delay) as base_url:
        env |= {"OPENAI_BASE_URL": base_url}
        template = Path(tmp) / "template"
        _workspace(template, scenes, env)
        command = ["eval", "run", "-m", "vlm", "--candidates", "--limit"]

        def fresh(name: str, in_flight: int) -> Path:
            folder = Path(tmp) / name
            shutil.copytree(template, folder)
            _settings(folder, in_flight)
            return folder

        sequential_passes = max(8, passes // 8)
        before = _calls(base_url)
        sequential, _ = _cli(*command, str(sequential_passes), cwd=fresh("sequential", 1), env=env)
        assert _calls(base_url) - before == sequential_passes
        concurrent = []
        for k in range(repeats):
            folder = fresh(f"concurrent{k}", concurrency)
            before = _calls(base_url)
            seconds, out = _cli(*command, str(passes), cwd=folder, env=env)
            assert _calls(base_url) - before == passes, out
            concurrent.append(seconds)
        everything = command[:-1]
        _cli(*everything, cwd=folder, env=env)                  # finish every pass of the candidates
        before = _calls(base_url)
        rerun, _ = _cli(*everything, cwd=folder, env=env)
        rerun_requests = _calls(base_url) - before
    sequential_scaled = sequential * passes / sequential_passes
    median = statistics.median(concurrent)
    result = {"passes": passes, "delay_s": delay, "concurrency": concurrency, "repeats": repeats,
              "concurrent_s": [round(s, 2) for s in concurrent], "concurrent_median_s": round(median, 2),
              "sequential_s_measured": round(sequential, 2), "sequential_passes": sequential_passes,
              "sequential_s_scaled": round(sequential_scaled, 2), "speedup": round(sequential_scaled / median, 1),
              "physical_limit_s": round(passes * delay / concurrency, 2),
              "rerun_s": round(rerun, 2), "rerun_requests": rerun_requests}
    result["meets_target"] = result["speedup"] >= 25 and rerun_requests == 0
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "eval_api.json").write_text(json.dumps(result, indent=2))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=600)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scenes", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="64 passes, one repeat")
    args = parser.parse_args()
    if args.quick:
        args.passes, args.repeats, args.scenes = 64, 1, 10
    print(json.dumps(run(args.passes, args.delay, args.concurrency, args.repeats, args.scenes), indent=2))


if __name__ == "__main__":
    main()
