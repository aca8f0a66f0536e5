"""The store's share of a `review pull` over a large published benchmark: what deciding the items whose
reviews changed costs when 100,000 questions are published.

A SQLite store holds `--questions` published questions, each with its review task, two keeping reviews
and its `human_review` verdict, as after many pulls and releases. One pull brings new review versions
(both annotators change the answer of `--changed` published questions): they go through the pull
stage (`review:pull`, the runner's ledger) and `lifecycle.reconcile` decides those questions again,
revising them. Timed: that pull, and, for comparison, reading every human_review verdict (what each pull
read before it was limited to the items whose reviews changed). Label Studio's export is not part of it.

Results: benchmarks/results/review_pull.json.

    .venv/bin/python benchmarks/review_pull.py               # 100,000 published questions, 10 changed
    .venv/bin/python benchmarks/review_pull.py --quick       # 10,000
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, save  # noqa: E402


def seed(store, n: int) -> list:
    from benchsmith.records import EPOCH, Image, Provenance, Question, Review, Verdict, stable_hash

    items = [Image(id=stable_hash("pull", i), path="shared.png", width=64, height=48) for i in range(n)]
    questions = [Question(item_id=item.id, dimension_id=1 + i % 9, text=f"Benchmark question {i}?",
                          options=[f"option {i} {k}" for k in "abcd"], answer=i % 4,
                          provenance=Provenance(backend="benchmark")) for i, item in enumerate(items)]
    store.add_items(items)
    store.add_questions(questions, stage="generate")
    ids = [q.id for q in questions]
    store.record_review_intents("question", ids, 1)
    store.set_review_task_ids({qid: 10 + i for i, qid in enumerate(ids)})
    store.move("question", ids, "in_review", stage="push")
    reviews = [Review(question_id=q.id, task_id=10 + i, annotation_id=2 * i + who, annotator=f"a{who}@x",
                      answer=q.answer, dimension_id=q.dimension_id, submitted_at=EPOCH + timedelta(seconds=1))
               for i, q in enumerate(questions) for who in (0, 1)]
    store.add_reviews(reviews)
    reviewed = {"review_answer": None, "review_dimension_id": None}
    store.move("question", ids, "accepted", stage="review", reason="2 of 2 kept", verdicts_to_add=[
        Verdict(subject_id=qid, subject_kind="question", stage="review", rule="human_review", passed=True,
                reason="2 of 2 kept", details={"reviewed": reviewed}) for qid in ids])
    store.move("question", ids, "published", stage="publish", reason="v1")
    return questions


def run(n: int, changed: int) -> dict:
    from annotation.pull import PullStage
    from annotation.questions import Questions
    from annotation.settings import ReviewSettings
    from annotation import lifecycle
    from benchsmith import runner
    from benchsmith.dimensions import registry
    from benchsmith.records import EPOCH, Review
    from benchsmith.store import Store

    with tempfile.TemporaryDirectory() as tmp, Store(f"sqlite:///{tmp}/bench.db") as store:
        started = time.perf_counter()
        questions = seed(store, n)
        seeded_s = time.perf_counter() - started
        kind = Questions(ReviewSettings(), registry())
        edits = [Review(question_id=q.id, task_id=10 + i, annotation_id=2 * i + who, annotator=f"a{who}@x",
                        answer=(q.answer + 1) % 4, dimension_id=q.dimension_id,
                        submitted_at=EPOCH + timedelta(seconds=2))
                 for i, q in enumerate(questions[:changed]) for who in (0, 1)]
        stage = PullStage("review:pull", edits, runner.config_key(2), lambda s, ids: lifecycle.reconcile(s, kind, ids))
        started = time.perf_counter()
        report = runner.run(stage, store).as_dict()
        pull_s = time.perf_counter() - started
        started = time.perf_counter()
        every = store.get_verdicts(stage="review", subject_kind="question")
        all_verdicts_s = time.perf_counter() - started
    return {"published_questions": n, "changed": changed, "seed_s": round(seeded_s, 1),
            "pull_s": round(pull_s, 3), "revised": report.get("revised", 0),
            "reading_every_human_review_verdict_s": round(all_verdicts_s, 3), "verdicts": len(every)}


if __name__ == "__main__":
    args = arguments(__doc__, {"questions": 10_000}, questions=100_000, changed=10).parse_args()
    save("review_pull", run(args.questions, args.changed))
