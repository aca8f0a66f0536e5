"""What does `benchsmith extract` add on top of the OCR model itself, and what does a rerun cost?

Over N oracle scenes ingested into a fresh workspace, in one run:
- raw: a bare loop that builds RapidOCR, opens each stored image and reads it;
- cli: `benchsmith extract --only rapidocr`, the installed command (process start, settings, store
  queries, one transaction per image, progress, the richness check);
- rerun: the same command again, with nothing left to do.
The raw loop runs before and after the command and its two timings are averaged, so drift on a shared
machine weighs on both sides alike. Targets: cli / raw <= 1.10; rerun finishes in seconds.
Results: benchmarks/results/extract_overhead.json.

    .venv/bin/python benchmarks/extract_overhead.py            # 200 scenes
    .venv/bin/python benchmarks/extract_overhead.py --quick    # 30 scenes
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
BENCHSMITH = str(Path(sys.executable).with_name("benchsmith"))


def _benchsmith(workspace: Path, *args: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHSMITH")} | {"HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run([BENCHSMITH, "--workspace", str(workspace), *args], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"benchsmith {' '.join(args)} failed: {done.stderr[-2000:]}")
    return seconds


def raw_loop(paths: list[Path]) -> float:
    import numpy as np
    from rapidocr import RapidOCR

    from benchsmith.images import open_rgb

    started = time.perf_counter()
    engine = RapidOCR()
    for path in paths:
        engine(np.asarray(open_rgb(path)))
    return time.perf_counter() - started


def run(scenes: int = 200, seed: int = 17) -> dict:
    import logging

    from benchsmith.scenes import make_scenes
    from benchsmith.settings import load_settings
    from benchsmith.store import Store

    logging.getLogger("RapidOCR").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        workspace = tmp / "bench"
        manifest = make_scenes(tmp / "scenes", scenes, seed=seed)
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
            counts = store.extraction_counts()
    raw = (raw_before + raw_after) / 2
    return {
        "case": "extract_overhead", "scenes": scenes, "images": len(paths), "seed": seed,
        "raw_seconds": round(raw, 2), "raw_seconds_before_after": [round(raw_before, 2), round(raw_after, 2)],
        "cli_seconds": round(cli, 2), "ratio": round(cli / raw, 3), "target_ratio": 1.10,
        "rerun_seconds": round(rerun, 2),
        "extractions": {f"{key} [{status}]": n for (key, status), n in counts.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--quick", action="store_true", help="30 scenes")
    args = parser.parse_args()
    result = run(scenes=30 if args.quick else args.scenes, seed=args.seed)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "extract_overhead.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
