"""E3: `benchsmith eval run --candidates` keeps only a window of images in memory, not every candidate's.

Setup (not measured): a workspace with N candidate questions, each on its own noise photo (a PNG of
about 230 kB, which compresses no better than a real photo). Measured: the CLI as a user runs it,
`benchsmith eval run -m blind-longest --candidates`, in a child process whose own peak RSS is read at
exit; on a fresh copy of the store each run (so each run scores every question), the median of
`--runs`. Done at N and at N/10: the target is that peak memory grows by at most a quarter of the image
bytes added between the two sizes (it grew by all of them when the source read every image up front).
Results: benchmarks/results/eval_candidates_memory.json.

    .venv/bin/python benchmarks/eval_candidates_memory.py            # 3,000 and 300 candidates
    .venv/bin/python benchmarks/eval_candidates_memory.py --quick    # 800 and 80
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, arguments, save, timed, user_env  # noqa: E402

PEAK = ("import atexit, resource, sys; atexit.register(lambda: sys.stderr.write("
        "f'PEAK_RSS_KB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')); "
        "from flows.app import main; main()")


def setup(workspace: Path, n: int) -> int:
    """N candidates, one image each; returns the bytes of all images."""
    import numpy as np
    from PIL import Image as PILImage

    from benchsmith.records import Image, Provenance, Question, sha256_bytes
    from benchsmith.settings import load_settings
    from benchsmith.store import Store

    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)})
    settings.media_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    items, questions, total = [], [], 0
    for k in range(n):
        path = settings.media_dir / f"photo{k:05d}.png"
        PILImage.fromarray(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)).save(path)
        data = path.read_bytes()
        total += len(data)
        item = Image(id=sha256_bytes(data), path=path.name, width=320, height=240)
        items.append(item)
        questions.append(Question(item_id=item.id, dimension_id=3, text=f"What colour is the thing in photo {k}?",
                                  options=[f"red {k}", f"green {k}", f"a blue one {k}", f"grey {k}"], answer=k % 4,
                                  provenance=Provenance(backend="synthetic")))
    with Store(settings.db_url) as store:
        store.add_items(items)
        store.add_questions(questions, stage="generate")
    return total


def run_once(workspace: Path, pristine: Path) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of one `eval run --candidates` on a fresh copy of the store."""
    shutil.copy(pristine, workspace / "benchsmith.db")
    env = user_env() | {"BENCHSMITH_WORKSPACE": str(workspace), "PYTHONPATH": str(ROOT)}
    seconds, done = timed(lambda: subprocess.run([sys.executable, "-c", PEAK, "eval", "run", "-m", "blind-longest",
                                                  "--candidates"], env=env, capture_output=True, text=True,
                                                 cwd=workspace))
    if done.returncode:
        raise SystemExit(f"eval run failed: {done.stderr[-2000:]}")
    peak = next(line for line in done.stderr.splitlines() if line.startswith("PEAK_RSS_KB"))
    return int(peak.split()[1]) / 1024, seconds


def measure(n: int, runs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-eval-mem-") as tmp:
        workspace = Path(tmp) / "ws"
        image_bytes = setup(workspace, n)
        pristine = Path(tmp) / "pristine.db"
        shutil.copy(workspace / "benchsmith.db", pristine)
        results = [run_once(workspace, pristine) for _ in range(runs)]
    peaks, times = zip(*results)
    return {"candidates": n, "image_mb": round(image_bytes / 2**20, 1), "peak_rss_mb": [round(p, 1) for p in peaks],
            "peak_rss_mb_median": round(statistics.median(peaks), 1), "seconds_median": round(statistics.median(times), 1)}


if __name__ == "__main__":
    # label: a name for this code state, written with the results and in the file's name
    args = arguments(__doc__, {"n": 800}, n=3000, runs=3, label="").parse_args()
    small, large = measure(args.n // 10, args.runs), measure(args.n, args.runs)
    growth = large["peak_rss_mb_median"] - small["peak_rss_mb_median"]
    added = large["image_mb"] - small["image_mb"]
    result = {"label": args.label, "small": small, "large": large, "rss_growth_mb": round(growth, 1),
              "images_added_mb": round(added, 1), "growth_per_image_mb": round(growth / added, 3),
              "meets_target": growth <= 0.25 * added}
    save("eval_candidates_memory" + (f"_{args.label}" if args.label else ""), result)
