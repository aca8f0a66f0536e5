"""How fast `publish` builds a release, and whether its memory stays flat as the release grows.

For each size, a fresh workspace gets oracle scenes and about three accepted counting questions per
scene (the same image in several questions and dimensions, as in real sets). The first build is cold:
it records the release and encodes every image. Further builds of the same version redo all the file
work but find the clean encodings in the workspace cache, as a next version does for the images it
shares with the last; their median is reported as warm. Also: bytes per question on disk and the
child's peak RSS. Publishing writes one shard at a time, so the peak should grow far slower than the release:
`rss_growth_vs_size` compares the largest and smallest size in one run. Setup is not timed.
Results: benchmarks/results/publish_throughput.json.

    .venv/bin/python benchmarks/publish_throughput.py            # 600 and 2400 questions, 1 cold + 3 warm builds
    .venv/bin/python benchmarks/publish_throughput.py --quick    # 90 and 360 questions, 2 builds
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, arguments, in_child, peak_rss_mb, save, timed  # noqa: E402

QUESTIONS_PER_SCENE = 3


def _accepted_store(workspace: Path, n_questions: int):
    from ingest.sources import candidates_for
    from ingest.stage import ingest
    from benchsmith.records import Provenance, Question
    from ingest.scenes import make_scenes
    from benchsmith.settings import load_settings
    from benchsmith.store import Store

    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)})
    n_scenes = -(-n_questions // QUESTIONS_PER_SCENE)
    manifest = make_scenes(workspace / "scenes", n_scenes, seed=3)
    store = Store(settings.db_url)
    ingest(store, settings.media_dir, candidates_for(manifest), settings.ingest, label="bench")
    questions = [Question(item_id=item.id, dimension_id=(5, 3, 9)[k], options=[str(k + v) for v in range(4)],
                          answer=k % 4, text=f"Question {k} about this scene?", provenance=Provenance(backend="bench"))
                 for item in store.get_items() for k in range(QUESTIONS_PER_SCENE)][:n_questions]
    store.add_questions(questions, stage="generate")
    ids = [q.id for q in questions]
    store.move("question", ids, "in_review", stage="review")
    store.move("question", ids, "accepted", stage="review")
    return store, settings


def publish_sizes(n_questions: int, repeats: int) -> dict:
    from publish.release import publish

    with tempfile.TemporaryDirectory() as tmp:
        store, settings = _accepted_store(Path(tmp) / "bench", n_questions)
        rss_before = peak_rss_mb()
        builds = [timed(lambda: publish(store, settings, "v1")) for _ in range(repeats)]
        seconds, result = [s for s, _ in builds], builds[-1][1]
        size = sum(p.stat().st_size for p in result.folder.rglob("*") if p.is_file())
        store.close()
    cold, warm = seconds[0], statistics.median(seconds[1:]) if len(seconds) > 1 else None
    return {"questions": result.n_questions, "seconds": [round(s, 3) for s in seconds],
            "cold_questions_per_second": round(result.n_questions / cold, 1),
            "warm_questions_per_second": round(result.n_questions / warm, 1) if warm else None,
            "bytes_per_question": round(size / result.n_questions),
            "peak_rss_mb": peak_rss_mb(), "rss_before_publish_mb": rss_before}


def run(sizes: list[int], repeats: int) -> dict:
    """Each size in its own process, so peak RSS belongs to that size alone."""
    by_size = {n: in_child(__file__, "publish_sizes", n, repeats, cwd=ROOT, env=os.environ | {"HF_HUB_OFFLINE": "1"})
               for n in sizes}
    small, large = by_size[min(sizes)], by_size[max(sizes)]
    growth = (large["peak_rss_mb"] - large["rss_before_publish_mb"]) / max(
        1.0, small["peak_rss_mb"] - small["rss_before_publish_mb"])
    return {"sizes": by_size, "size_ratio": max(sizes) / min(sizes), "rss_growth_vs_size": round(growth, 2)}


if __name__ == "__main__":
    # repeats: builds of each size, the first cold
    args = arguments(__doc__, {"sizes": [90, 360], "repeats": 2}, sizes=[600, 2400], repeats=4).parse_args()
    save("publish_throughput", run(args.sizes, args.repeats))
