"""The reviews mixin of the store (benchsmith/store/reviews.py), on SQLite and PostgreSQL."""

from __future__ import annotations

from benchsmith.records import Review


def review(question_id: str, annotation_id: int, answer: int = 0) -> Review:
    return Review(question_id=question_id, task_id=annotation_id // 10, annotation_id=annotation_id,
                  annotator=f"a{annotation_id}", answer=answer, dimension_id=3, reasons=[])


def test_intents_wait_for_their_task_ids(store):
    store.record_review_intents("question", ["q1", "q2"], project_id=4)
    assert store.get_review_tasks("question") == {"q1": (4, None), "q2": (4, None)}
    store.set_review_task_ids({"q1": 101})
    assert store.get_review_tasks("question", ["q1", "q3"]) == {"q1": (4, 101)}
    store.record_review_intents("question", ["q2"], project_id=5)  # re-sent to another project after a lost one
    assert store.get_review_tasks("question")["q2"] == (5, None)


def test_reviews_are_counted_once_and_an_edit_replaces_the_earlier_version(store):
    assert store.add_reviews([review("q1", 10), review("q1", 11), review("q2", 20)]) == 3
    assert store.add_reviews([review("q1", 10, answer=3)]) == 0
    stored = store.get_reviews(["q1"])
    assert [(r.annotation_id, r.answer) for r in stored] == [(10, 3), (11, 0)]
    assert len(store.get_reviews()) == 3
