"""P6: 100,000 candidate questions through the offline blind filter and publish; peak RSS must stay <= 2 GB.

Setup (not measured): a workspace with oracle scenes and N candidate questions spread over them (50 per
scene, each with its own text and options). Measured, in a child process so the peak is its own: the
`local` profile's blind filter over every candidate, a scripted review that accepts every kept question,
and `publish`. Results: benchmarks/results/filter_publish_memory.json.

    .venv/bin/python benchmarks/filter_publish_memory.py              # 100,000 questions
    .venv/bin/python benchmarks/filter_publish_memory.py --quick      # 5,000 questions
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, in_child, peak_rss_mb, save, timed  # noqa: E402

PER_SCENE = 50
TARGET_MB = 2048


def setup(workspace: Path, n_questions: int) -> None:
    from ingest.sources import candidates_for
    from ingest.stage import ingest
    from benchsmith.records import Provenance, Question
    from ingest.scenes import COLOURS, SHAPES, make_scenes
    from benchsmith.settings import load_settings
    from benchsmith.store import Store

    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)})
    scenes = make_scenes(workspace / "scenes", max(1, n_questions // PER_SCENE), seed=5)
    rng = random.Random(5)
    provenance = Provenance(backend="synthetic")
    with Store(settings.db_url) as store:
        ingest(store, settings.media_dir, candidates_for(scenes), settings.ingest, label="scenes")
        items = store.get_items()
        batch = []
        for k in range(n_questions):
            item = items[k % len(items)]
            shapes = rng.sample(SHAPES, 4)
            colour = rng.choice(list(COLOURS))
            batch.append(Question(item_id=item.id, dimension_id=rng.choice([2, 3, 5]),
                                  text=f"Which shape is drawn in {colour}? (variant {k})", options=shapes,
                                  answer=rng.randrange(4), provenance=provenance))
            if len(batch) == 5000:
                store.add_questions(batch, stage="generate")
                batch = []
        store.add_questions(batch, stage="generate")


def measure(workspace: Path) -> dict:
    from publish.release import publish
    from benchsmith.settings import load_settings
    from benchsmith.store import Store
    from filters import blind

    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)})
    times = {}
    with Store(settings.db_url) as store:
        start = time.perf_counter()
        config = blind.blind_settings(settings)
        result = blind.apply(store, config, blind.solvers_from(config, settings=settings, store=store))
        times["filter_s"] = round(time.perf_counter() - start, 1)
        filtered_rss = peak_rss_mb()

        start = time.perf_counter()
        kept = [q.id for q in store.get_questions(status="candidate")]
        store.move("question", kept, "in_review", stage="review", reason="benchmark")
        store.move("question", kept, "accepted", stage="review", reason="benchmark: scripted review")
        times["review_s"] = round(time.perf_counter() - start, 1)

        seconds, release = timed(lambda: publish(store, settings, "v1"))
        times["publish_s"] = round(seconds, 1)
    return {"filter": blind.counts(result), "kept": len(kept),
            "published": release.n_questions, **times,
            "peak_rss_after_filter_mb": filtered_rss, "peak_rss_mb": peak_rss_mb()}


def run(n_questions: int = 100_000) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "bench"
        setup_s, _ = timed(lambda: setup(workspace, n_questions))
        measured = in_child(__file__, "measure", workspace)
    return {"case": "P6 filter_publish_memory", "questions": n_questions, "setup_s": round(setup_s, 1), **measured,
            "target_peak_rss_mb": TARGET_MB, "meets_target": measured["peak_rss_mb"] <= TARGET_MB}


if __name__ == "__main__":
    args = arguments(__doc__, {"n": 5000}, n=100_000).parse_args()  # n: candidate questions
    save("filter_publish_memory", run(args.n))
