"""What does `benchsmith extract` add on top of the OCR model itself, and what does a rerun cost?

Over N oracle scenes ingested into a fresh workspace, in one run:
- raw: a bare loop that builds RapidOCR, opens each stored image and reads it;
- cli: `benchsmith extract --only rapidocr`, the installed command (process start, settings, store
  queries, one transaction per image, progress, the richness check);
- rerun: the same command again, with nothing left to do.
The raw loop runs before and after the command and its two timings are averaged, so drift on a shared
machine weighs on both sides alike; each repeat (default 3) uses a fresh workspace, and the medians of
the per-run ratios and rerun times are reported. Targets: cli / raw <= 1.10; rerun finishes in seconds. CPU seconds (process time of each side) are
reported too: on a busy shared machine they vary far less than wall time.
Results: benchmarks/results/extract_overhead.json.

    .venv/bin/python benchmarks/extract_overhead.py            # 200 scenes
    .venv/bin/python benchmarks/extract_overhead.py --quick    # 30 scenes
"""

from __future__ import annotations

import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, cli, save, user_env  # noqa: E402


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _benchsmith(workspace: Path, *args: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `benchsmith` command."""
    cpu = _children_cpu()
    wall, _ = cli("--workspace", str(workspace), *args, cwd=workspace, env=user_env() | {"HF_HUB_OFFLINE": "1"})
    return wall, _children_cpu() - cpu


def raw_loop(paths: list[Path]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of building RapidOCR and reading every image."""
    import numpy as np
    from rapidocr import RapidOCR

    from benchsmith.images import open_rgb

    started, cpu = time.perf_counter(), time.process_time()
    engine = RapidOCR()
    for path in paths:
        engine(np.asarray(open_rgb(path)))
    return time.perf_counter() - started, time.process_time() - cpu


def one_run(tmp: Path, manifest: Path) -> dict:
    """Ingest into a fresh workspace (untimed), then raw loop, command, raw loop, and the rerun."""
    from benchsmith.settings import load_settings
    from benchsmith.store import Store

    workspace = Path(tempfile.mkdtemp(dir=tmp, prefix="bench-"))
    _benchsmith(workspace, "ingest", str(manifest))
    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)})
    with Store(settings.db_url) as store:
        paths = [settings.media_dir / image.path for image in store.get_items(kind="image")]
    raw_loop(paths[:5])  # warm the page cache and onnxruntime before anything is timed
    raw_before = raw_loop(paths)
    cli = _benchsmith(workspace, "extract", "--only", "rapidocr")
    raw_after = raw_loop(paths)
    rerun = _benchsmith(workspace, "extract", "--only", "rapidocr")
    with Store(settings.db_url) as store:
        done = store.extraction_counts()
    raw = [(before + after) / 2 for before, after in zip(raw_before, raw_after)]
    return {"images": len(paths),
            "raw_wall_seconds_before_after": [round(raw_before[0], 2), round(raw_after[0], 2)],
            "cli_wall_seconds": round(cli[0], 2), "ratio": round(cli[0] / raw[0], 3),
            "raw_cpu_seconds": round(raw[1], 2), "cli_cpu_seconds": round(cli[1], 2),
            "cpu_ratio": round(cli[1] / raw[1], 3), "rerun_seconds": round(rerun[0], 2),
            "extractions": {f"{key} [{status}]": n for (key, status), n in done.items()}}


def run(scenes: int = 200, seed: int = 17, repeats: int = 3) -> dict:
    import logging

    from ingest.scenes import make_scenes

    logging.getLogger("RapidOCR").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        manifest = make_scenes(Path(tmp) / "scenes", scenes, seed=seed)
        runs = [one_run(Path(tmp), manifest) for _ in range(repeats)]
    return {"case": "extract_overhead", "scenes": scenes, "seed": seed, "repeats": repeats,
            "ratio_median": round(statistics.median(r["ratio"] for r in runs), 3), "target_ratio": 1.10,
            "cpu_ratio_median": round(statistics.median(r["cpu_ratio"] for r in runs), 3),
            "rerun_seconds_median": round(statistics.median(r["rerun_seconds"] for r in runs), 2), "runs": runs}


if __name__ == "__main__":
    args = arguments(__doc__, {"scenes": 30}, scenes=200, seed=17, repeats=3).parse_args()
    save("extract_overhead", run(args.scenes, args.seed, args.repeats))
