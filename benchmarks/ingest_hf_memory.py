"""Ingesting a Hugging Face dataset holds no more memory as the dataset grows.

A dataset saved with `save_to_disk` holds N noise images of 128x128 px (about 49 KB each as PNG, so
20,000 of them are about 1 GB). `benchsmith ingest <dataset>` runs on each size in its own process.
Two peaks are recorded: the process tree's anonymous memory (RssAnon of the command and its workers,
sampled from /proc every 50 ms: what the process itself holds), and the whole RSS from the kernel's
resource usage, which also counts the dataset's memory-mapped Arrow pages the reads touched: file
pages the kernel shares with its cache and drops under memory pressure, so they grow with the dataset
without being held. Flat means the largest size's anonymous peak stays within 1.25x the smallest's.
Results: benchmarks/results/ingest_hf_memory.json.

    .venv/bin/python benchmarks/ingest_hf_memory.py                  # 5,000, 10,000 and 20,000 images
    .venv/bin/python benchmarks/ingest_hf_memory.py --sizes 500 2000  # quicker
"""

from __future__ import annotations

import io
import resource
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import BENCHSMITH, arguments, in_child, save, user_env  # noqa: E402
from benchmarks.process_tree import run_sampled  # noqa: E402


def make_dataset(folder: Path, n: int) -> Path:
    import datasets
    from PIL import Image

    rng = np.random.default_rng(n)

    def rows():
        for i in range(n):
            buffer = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (128, 128, 3), dtype=np.uint8)).save(buffer, "PNG")
            yield {"image": {"bytes": buffer.getvalue(), "path": None}, "caption": f"noise {i}"}

    features = datasets.Features({"image": datasets.Image(), "caption": datasets.Value("string")})
    datasets.Dataset.from_generator(rows, features=features).save_to_disk(str(folder))
    return folder


def one(n: int) -> dict:
    """`benchsmith ingest` of an n-image dataset: its peak anonymous MB over its process tree, peak RSS MB, seconds."""
    env = user_env() | {"BENCHSMITH__INGEST__RICHNESS__ENABLED": "false"}
    with tempfile.TemporaryDirectory() as tmp:
        dataset = make_dataset(Path(tmp) / "dataset", n)
        size_mb = sum(f.stat().st_size for f in dataset.rglob("*") if f.is_file()) / 2**20
        seconds, peaks, out, err, code = run_sampled([BENCHSMITH, "ingest", str(dataset)], cwd=Path(tmp), env=env)
    if code != 0:
        raise RuntimeError(out + err)
    # ru_maxrss of the children waited for so far: each size runs after the previous, so it only grows;
    # run one size per process of this script (see main) to read each size's own peak
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"images": n, "dataset_mb": round(size_mb, 1), "peak_anon_mb": round(peaks["anon"], 1),
            "peak_rss_mb": round(peak, 1), "seconds": round(seconds, 1)}


if __name__ == "__main__":
    args = arguments(__doc__, sizes=[5000, 10000, 20000]).parse_args()
    runs = [in_child(__file__, "one", n) for n in args.sizes]
    result = {"runs": runs,
              "anon_ratio_largest_to_smallest": round(runs[-1]["peak_anon_mb"] / runs[0]["peak_anon_mb"], 2),
              "rss_ratio_largest_to_smallest": round(runs[-1]["peak_rss_mb"] / runs[0]["peak_rss_mb"], 2),
              "target_ratio": 1.25}
    result["flat"] = result["anon_ratio_largest_to_smallest"] <= result["target_ratio"]
    save("ingest_hf_memory", result)
