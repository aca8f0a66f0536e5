"""Ingest throughput and memory: N small images from a folder into a fresh SQLite store.

Targets (issue 2): >= 200 images/s on 2 cores with no caption filter, and peak memory flat as N grows.
Each size runs in its own process so its peak RSS is its own. Results: benchmarks/results/ingest_throughput.json.

    .venv/bin/python benchmarks/ingest_throughput.py            # 2,500 / 5,000 / 10,000 images
    .venv/bin/python benchmarks/ingest_throughput.py --quick    # 250 / 500 / 1,000
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, in_child, peak_rss_mb, save, timed  # noqa: E402


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


def measure(folder: str, n: int, workers: int) -> dict:
    """Ingest the first n files of folder into a new store (run in a child process)."""
    from ingest.candidates import folder_candidates
    from ingest.stage import ingest
    from benchsmith.settings import IngestSettings
    from benchsmith.store import Store

    with tempfile.TemporaryDirectory() as tmp, Store(f"sqlite:///{tmp}/bench.db") as store:
        candidates = [c for _, c in zip(range(n), folder_candidates(Path(folder)))]
        seconds, report = timed(lambda: ingest(store, Path(tmp) / "media", candidates, IngestSettings(),
                                               label="bench", workers=workers))
    assert report.added == n, report.summary()
    return {"n": n, "workers": workers, "seconds": round(seconds, 3), "images_per_s": round(n / seconds, 1),
            "peak_rss_mb": peak_rss_mb()}


def run(sizes: list[int], workers: int = 2) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "images"
        make_images(folder, max(sizes))
        rows = [in_child(__file__, "measure", folder, n, workers) for n in sizes]
    largest = rows[-1]
    return {"case": "ingest_throughput", "runs": rows,
            "images_per_s_at_largest_n": largest["images_per_s"], "target_images_per_s": 200,
            "rss_growth_mb_smallest_to_largest": round(largest["peak_rss_mb"] - rows[0]["peak_rss_mb"], 1),
            "meets_target": largest["images_per_s"] >= 200}


if __name__ == "__main__":
    # workers: decoding processes, one per core
    args = arguments(__doc__, {"sizes": [250, 500, 1000]}, sizes=[2500, 5000, 10000], workers=2).parse_args()
    save("ingest_throughput", run(args.sizes, workers=args.workers))
