"""Ingest throughput and memory: N small images from a folder into a fresh SQLite store.

Targets (issue 2): >= 200 images/s on 2 cores with no caption filter, and peak memory flat as N grows.
Each size runs in its own process so its peak RSS is its own. Results: benchmarks/results/ingest_throughput.json.

    .venv/bin/python benchmarks/ingest_throughput.py            # 2,500 / 5,000 / 10,000 images
    .venv/bin/python benchmarks/ingest_throughput.py --quick    # 250 / 500 / 1,000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

RESULTS = Path(__file__).parent / "results"


def make_images(folder: Path, n: int) -> None:
    """n distinct small photos-like images, alternating JPEG and PNG."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (72, 96, 3), dtype=np.uint8)
    for i in range(n):
        pixels = base.copy()
        pixels[i % 72, :, :] = i % 251  # one changed row keeps every file distinct
        pixels[:, i % 96, 0] = (i // 251) % 251
        name = folder / f"{i // 1000:02d}" / f"img_{i:06d}.{'jpg' if i % 2 else 'png'}"
        name.parent.mkdir(exist_ok=True)
        Image.fromarray(pixels).save(name, "JPEG" if i % 2 else "PNG")


def measure(folder: Path, n: int, workers: int) -> dict:
    """Ingest the first n files of folder into a new store (run in a child process)."""
    from ingest.candidates import folder_candidates
    from ingest.stage import ingest
    from benchsmith.settings import IngestSettings
    from benchsmith.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/bench.db")
        candidates = [c for _, c in zip(range(n), folder_candidates(folder))]
        start = time.perf_counter()
        report = ingest(store, Path(tmp) / "media", candidates, IngestSettings(), label="bench", workers=workers)
        seconds = time.perf_counter() - start
        store.close()
    assert report.added == n, report.summary()
    return {"n": n, "workers": workers, "seconds": round(seconds, 3), "images_per_s": round(n / seconds, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def run(sizes: tuple[int, ...] = (2500, 5000, 10000), workers: int = 2) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "images"
        make_images(folder, max(sizes))
        rows = []
        for n in sizes:
            out = subprocess.run([sys.executable, __file__, "--child", str(folder), "--n", str(n),
                                  "--workers", str(workers)], capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    largest = rows[-1]
    return {
        "case": "ingest_throughput", "runs": rows,
        "images_per_s_at_largest_n": largest["images_per_s"], "target_images_per_s": 200,
        "rss_growth_mb_smallest_to_largest": round(largest["peak_rss_mb"] - rows[0]["peak_rss_mb"], 1),
        "meets_target": largest["images_per_s"] >= 200,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes for a fast check")
    parser.add_argument("--workers", type=int, default=2, help="decoding processes (default 2, one per core)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.n, args.workers)))
        return
    result = run((250, 500, 1000) if args.quick else (2500, 5000, 10000), workers=args.workers)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ingest_throughput.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
