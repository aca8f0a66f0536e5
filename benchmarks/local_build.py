"""The whole local build as a user runs it, stage by stage (issue 49): `benchsmith scenes make`, then
`ingest`, `extract`, `generate` and `filter` of the oracle scenes, each its own command on the default
(local, offline) profile: supplied annotations + RapidOCR, programmatic and temporal questions, the offline
blind solvers. Every run starts in a fresh workspace, with Python's bytecode cache on as in a user's
install (`user_env`). Reported per stage: each run's wall seconds and their median; the build (ingest to
filter; rendering the scenes is not part of it) in images a second; `benchsmith --help`, the start-up
that every command pays; the load average around each run, since the machine may be shared; and each
command's CPU seconds (user + system), which a busy machine inflates far less than wall time (on 2 quiet
cores a command's wall time lies between its CPU time and half of it).

`--profile` also samples every command with py-spy (the install-dev lock carries it) and keeps, per stage,
the share of its samples spent importing and the functions that held most of them: where the time went.
Target: 2 images a second or more on 2 cores (40 scenes in 20 s). Results: benchmarks/results/local_build.json.

    .venv/bin/python benchmarks/local_build.py                      # 40 scenes, 3 runs
    .venv/bin/python benchmarks/local_build.py --quick              # 8 scenes, 1 run
    .venv/bin/python benchmarks/local_build.py --runs 1 --profile   # where the time goes
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import BENCHSMITH, ROOT, arguments, cli, save, user_env  # noqa: E402

STAGES = {"ingest": ["ingest", "scenes/manifest.jsonl"], "extract": ["extract"], "generate": ["generate"],
          "filter": ["filter"]}
TARGET_IMAGES_PER_S = 2.0
# frames that every command shares (the console script, typer's dispatch): they hold every sample
PLUMBING = ("typer/", "click/", "<module> (benchsmith", "main (benchsmith/cli.py", "runpy")


def _py_spy() -> str:
    found = shutil.which("py-spy", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if not found:
        raise SystemExit("--profile needs py-spy (`make install-dev`, locks/install-dev.txt)")
    return found


def _frame(frame: str) -> str:
    """'function (path/to/file.py:line)' as 'function (file path from the package root)'."""
    function, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    for root in (str(ROOT) + "/", "site-packages/", "lib/python3."):
        if root in path:
            path = path.split(root, 1)[1]
    return f"{function} ({path})"


def _summary(raw: Path, top: int = 12) -> dict:
    """Where one command's samples went: the share under an import, the functions that held the most
    samples with their callees (command plumbing aside), and those that held the most themselves."""
    inclusive, own, total, importing = Counter(), Counter(), 0, 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = [_frame(f) for f in stack.split(";")]
        importing += n * any(f.startswith("_find_and_load ") for f in frames)
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    kept = [(f, n) for f, n in inclusive.most_common()
            if not any(p in f for p in PLUMBING) and "importlib" not in f and "<frozen" not in f]
    return {"samples": total, "importing_share": round(importing / max(total, 1), 3),
            "top_inclusive": {f: round(n / max(total, 1), 3) for f, n in kept[:top]},
            "top_self": {f: round(n / max(total, 1), 3) for f, n in own.most_common(top // 2)}}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _command(args: list[str], cwd: Path, env: dict, profile: Path | None) -> tuple[float, float]:
    """One command's wall seconds and the CPU seconds it spent (None when profiled: py-spy starts the
    command and does not wait for it, so its CPU time is not counted)."""
    cpu = _children_cpu()
    if profile is None:
        return cli(*args, cwd=cwd, env=env)[0], _children_cpu() - cpu
    started = time.perf_counter()
    done = subprocess.run([_py_spy(), "record", "--rate", "50", "--format", "raw", "--output", str(profile),
                           "--", BENCHSMITH, *args], cwd=cwd, env=env | {"COLUMNS": "200"}, capture_output=True,
                          text=True)
    if done.returncode:
        raise RuntimeError(f"benchsmith {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.perf_counter() - started, None


def one_build(folder: Path, scenes: int, env: dict, profile: bool) -> dict:
    folder.mkdir(parents=True)
    load_before, profiles = os.getloadavg()[0], {}
    seconds, cpu = {}, {}
    for name, args in {"help": ["--help"], "scenes_make": ["scenes", "make", "--n", str(scenes), "--out", "scenes"],
                       **STAGES}.items():
        raw = folder / f"{name}.spy" if profile and name in STAGES else None
        seconds[name], cpu[name] = _command(args, folder, env, raw)
        if raw is not None:
            profiles[name] = _summary(raw)
    seconds["build"] = sum(seconds[stage] for stage in STAGES)
    cpu["build"] = None if profile else sum(cpu[stage] for stage in STAGES)
    return {"seconds": {k: round(v, 2) for k, v in seconds.items()},
            "cpu_seconds": {k: None if v is None else round(v, 2) for k, v in cpu.items()}, "profiles": profiles,
            "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]}


def run(scenes: int = 40, runs: int = 3, profile: bool = False) -> dict:
    env = user_env("PREFECT_API", "OPENAI")
    with tempfile.TemporaryDirectory() as tmp:
        builds = [one_build(Path(tmp) / f"run{i}", scenes, env, profile) for i in range(runs)]
    medians = {name: round(statistics.median(b["seconds"][name] for b in builds), 2) for name in builds[0]["seconds"]}
    cpu = {name: None if profile else round(statistics.median(b["cpu_seconds"][name] for b in builds), 2)
           for name in builds[0]["cpu_seconds"]}
    images_per_s = scenes / medians["build"]
    return {"case": "local_build", "scenes": scenes, "runs": runs, "median_seconds": medians,
            "median_cpu_seconds": cpu,
            "stage_share": {stage: round(medians[stage] / medians["build"], 3) for stage in STAGES},
            "images_per_s": round(images_per_s, 2), "target_images_per_s": TARGET_IMAGES_PER_S,
            "meets_target": images_per_s >= TARGET_IMAGES_PER_S, "profiled": profile,
            "builds": builds}


if __name__ == "__main__":
    parser = arguments(__doc__, {"scenes": 8, "runs": 1}, scenes=40, runs=3)
    parser.add_argument("--profile", action="store_true", help="sample every command with py-spy")
    args = parser.parse_args()
    save("local_build", run(args.scenes, args.runs, args.profile))
