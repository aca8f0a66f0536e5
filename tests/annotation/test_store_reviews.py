"""The reviews mixin of the store (benchsmith/store/reviews.py), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from benchsmith.records import EPOCH, ConversationReview, Review, Turn


def review(question_id: str, annotation_id: int, answer: int = 0, saved: int = 0) -> Review:
    return Review(question_id=question_id, task_id=annotation_id // 10, annotation_id=annotation_id,
                  annotator=f"a{annotation_id}", answer=answer, dimension_id=3, reasons=[],
                  submitted_at=EPOCH + timedelta(seconds=saved))


def test_intents_wait_for_their_task_ids(store):
    store.record_review_intents("question", ["q1", "q2"], project_id=4)
    assert store.get_review_tasks("question") == {"q1": (4, None), "q2": (4, None)}
    store.set_review_task_ids({"q1": 101})
    assert store.get_review_tasks("question", ["q1", "q3"]) == {"q1": (4, 101)}
    store.record_review_intents("question", ["q2"], project_id=5)  # re-sent to another project after a lost one
    assert store.get_review_tasks("question")["q2"] == (5, None)


def test_every_version_is_kept_and_each_annotations_latest_one_counts(store):
    assert store.add_reviews([review("q1", 10), review("q1", 11), review("q2", 20)]) == 3
    assert store.add_reviews([review("q1", 10)]) == 0  # pulled again, unchanged
    assert store.add_reviews([review("q1", 10, answer=3, saved=5)]) == 1  # edited in Label Studio
    assert [(r.annotation_id, r.answer) for r in store.get_reviews(["q1"])] == [(10, 3), (11, 0)]
    assert store.add_reviews([review("q1", 10, answer=0, saved=9)]) == 1  # and edited back
    assert [(r.annotation_id, r.answer) for r in store.get_reviews(["q1"])] == [(10, 0), (11, 0)]
    history = [r.answer for r in store.get_reviews(["q1"], every_version=True) if r.annotation_id == 10]
    assert history == [0, 3, 0]
    assert len(store.get_reviews()) == 3


def test_reviews_of_each_kind_are_read_apart(store):
    turns = [Turn(level="perception", instruction="What is red?", reference="The square.")]
    store.add_reviews([review("q1", 10), ConversationReview(conversation_id="c1", task_id=7, annotation_id=70,
                                                            annotator="a", turns=turns)])
    assert [r.question_id for r in store.get_reviews()] == ["q1"]
    (talk,) = store.get_reviews(kind="conversation")
    assert isinstance(talk, ConversationReview) and talk.conversation_id == "c1" and talk.turns == turns
