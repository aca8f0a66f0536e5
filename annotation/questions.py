"""Questions as a kind of reviewed item (`annotation.lifecycle.Kind`): the first round of review decides
them; a second look (annotation/second_look.py) builds on this kind."""

from __future__ import annotations

from dataclasses import dataclass

from annotation import lifecycle
from annotation.reconcile import decide
from annotation.settings import ReviewSettings
from benchsmith.dimensions import Registry
from benchsmith.records import LETTERS, Question, Review
from benchsmith.store import Store


@dataclass(frozen=True)
class Questions(lifecycle.Kind):
    """Questions as a kind of reviewed item: their first-round reviews decide them by majority, and an
    acceptance sets the reviewed answer and dimension."""

    review: ReviewSettings
    registry: Registry
    name: str = "question"

    @property
    def overlap(self) -> int:
        return self.review.overlap

    def items(self, store: Store, statuses, ids=None) -> list[Question]:
        return store.get_questions(status=list(statuses), ids=ids)

    def reviews(self, store: Store, items) -> dict[str, list[Review]]:
        ids = [q.id for q in items]
        first_round = {task for _project, task in store.get_review_tasks("question", ids).values()}
        out: dict[str, list[Review]] = {}
        for r in store.get_reviews(ids):
            if r.task_id in first_round:  # a second look decides in its own round (second_look.py)
                out.setdefault(r.question_id, []).append(r)
        return out

    def decide(self, question: Question, reviews) -> lifecycle.Decision:
        return decide(question, reviews, self.overlap)

    def reviewed(self, question: Question) -> dict:
        return {"review_answer": question.review_answer, "review_dimension_id": question.review_dimension_id}

    def revision(self, question: Question, before: dict, after: dict) -> str:
        return change_text(question.answer if before["review_answer"] is None else before["review_answer"],
                           question.dimension_id if before["review_dimension_id"] is None
                           else before["review_dimension_id"],
                           after["review_answer"], after["review_dimension_id"], self.registry) + " in review"


def change_text(answer: int, dimension: int, new_answer: int, new_dimension: int, registry: Registry) -> str:
    """A change of answer or dimension in words: "answer A -> C and dimension X -> Y"."""
    parts = []
    if new_answer != answer:
        parts.append(f"answer {LETTERS[answer]} -> {LETTERS[new_answer]}")
    if new_dimension != dimension:
        parts.append(f"dimension {registry.get(dimension).name} -> {registry.get(new_dimension).name}")
    return " and ".join(parts) or "reviewed again, unchanged"
