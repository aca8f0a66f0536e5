"""Bring annotations back from Label Studio and turn them into question outcomes.

Reviews are stored first, so a pull that fails half-way loses nothing the server gave us, and deciding
again from the stored reviews gives the same outcome.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from annotation import lifecycle
from annotation.client import Server, read_annotations
from annotation.labeling import to_review
from annotation.reconcile import ADJUDICATION, Agreement, Decision, agreement_by_dimension, decide
from annotation.settings import ReviewSettings
from benchsmith.dimensions import Registry
from benchsmith.records import LETTERS, Question, Review
from benchsmith.settings import Settings
from benchsmith.store import Store


@dataclass
class PullReport:
    new_reviews: int = 0
    unreadable: list[str] = field(default_factory=list)  # annotations that fit no choice of the config
    outcomes: Counter = field(default_factory=Counter)
    agreement: dict[str, dict[str, Agreement]] = field(default_factory=dict)
    second_looks: Counter = field(default_factory=Counter)  # annotation/second_look.py's outcomes of this pull
    conversations: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        first = f", first: {self.unreadable[0]}" if self.unreadable else ""
        return pull_line(self.as_dict()) + first

    def as_dict(self) -> dict:
        return {"new_reviews": self.new_reviews, "unreadable": len(self.unreadable), **{k: self.outcomes[k] for k in
                ("accepted", "rejected", "flagged", "waiting", "revised", "withdrawn")},
                "kappa": {group: {what: a.kappa for what, a in by.items()} for group, by in self.agreement.items()},
                "second_looks": dict(self.second_looks), "conversations": dict(self.conversations)}


def pull_line(counts: dict) -> str:
    """One line on a pull, from `PullReport.as_dict()` (which is also what the finish flow returns)."""
    unreadable = f"; {counts['unreadable']} annotations not understood" if counts["unreadable"] else ""
    looks = counts.get("second_looks") or {}
    second = ("; second looks: " + ", ".join(f"{n} {outcome}" for outcome, n in sorted(looks.items()))) if looks else ""
    later = [f"{counts[k]} {k}" for k in ("revised", "withdrawn") if counts.get(k)]
    after = f"; changed since decided: {', '.join(later)}" if later else ""
    talks = counts.get("conversations") or {}
    conversations = ("; conversations: " + ", ".join(f"{n} {outcome}" for outcome, n in sorted(talks.items()))
                     if talks else "")
    return (f"{counts['new_reviews']} new reviews; decided now: {counts['accepted']} accepted, {counts['rejected']} "
            f"rejected; still in review: {counts['flagged']} tied (waiting for a deciding annotation), "
            f"{counts['waiting']} waiting for reviews{after}{unreadable}{second}{conversations}")


def fetch_reviews(server: Server, project_ids: set[int], registry: Registry,
                  review: ReviewSettings) -> tuple[list[Review], list[str]]:
    """Every submitted (not skipped) annotation in these projects, as Reviews; and why any could not be read."""
    return read_annotations(server, project_ids, "question_id",
                            lambda task, annotation: to_review(task, annotation, registry, review))


def decisions_in_review(store: Store, review: ReviewSettings) -> list[Decision]:
    """What the stored reviews decide for each question now in review."""
    questions = store.get_questions(status="in_review")
    by_question: dict[str, list[Review]] = {}
    for r in store.get_reviews([q.id for q in questions]):
        by_question.setdefault(r.question_id, []).append(r)
    return [decide(q, by_question.get(q.id, []), review.overlap) for q in questions]


def flagged_questions(store: Store, review: ReviewSettings) -> list[tuple[Question, Decision, tuple[int, int | None]]]:
    """Questions in review whose reviews tie: each with its decision and its (project, task) on the server."""
    questions = {q.id: q for q in store.get_questions(status="in_review")}
    ties = [d for d in decisions_in_review(store, review) if d.outcome == "flagged"]
    tasks = store.get_review_tasks("question", [d.question_id for d in ties])
    return [(questions[d.question_id], d, tasks.get(d.question_id, (0, None))) for d in ties]


def agreement(store: Store) -> dict[str, dict[str, Agreement]]:
    """κ over every stored review of a first round, per dimension (second looks are another question:
    whether a published answer survives the models' doubt)."""
    second_looks = {task for _project, task in store.get_second_look_tasks().values()}
    reviews = [r for r in store.get_reviews() if r.task_id not in second_looks]
    questions = store.get_questions(ids=sorted({r.question_id for r in reviews}))
    return agreement_by_dimension(questions, reviews)


@dataclass(frozen=True)
class Questions:
    """Questions as a kind of reviewed item: their first-round reviews decide them by majority, and an
    acceptance sets the reviewed answer and dimension."""

    review: ReviewSettings
    registry: Registry
    name: str = "question"

    def items(self, store: Store, statuses) -> list[Question]:
        return store.get_questions(status=list(statuses))

    def reviews(self, store: Store, items) -> dict[str, list[Review]]:
        ids = [q.id for q in items]
        first_round = {task for _project, task in store.get_review_tasks("question", ids).values()}
        out: dict[str, list[Review]] = {}
        for r in store.get_reviews(ids):
            if r.task_id in first_round:  # a second look decides in its own round (second_look.py)
                out.setdefault(r.question_id, []).append(r)
        return out

    def decide(self, question: Question, reviews) -> lifecycle.Decision:
        d = decide(question, reviews, self.review.overlap)
        if d.outcome == "accepted":
            return lifecycle.Decision("accepted", "kept by the annotators' majority",
                                      {"review_answer": d.answer, "review_dimension_id": d.dimension_id})
        if d.outcome == "rejected":
            return lifecycle.Decision("rejected", "discarded: " + (", ".join(d.reasons) or "no reason given"),
                                      details={"reasons": list(d.reasons), "comments": list(d.comments)})
        if d.outcome == "flagged":
            return lifecycle.Decision("flagged", f"{ADJUDICATION}: no majority on " + " and ".join(d.reasons),
                                      details={"unsettled": list(d.reasons), "n_reviews": d.n_reviews})
        return lifecycle.Decision("waiting")

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


def review_status(store: Store, settings: Settings) -> tuple[dict[str, int], dict[str, dict[str, Agreement]]]:
    """Counts for `benchsmith review status`, read from the store without changing it."""
    from annotation.second_look import second_look_counts

    review = settings.section("review", ReviewSettings)
    tasks = store.get_review_tasks("question")
    pending = Counter(d.outcome for d in decisions_in_review(store, review))
    by_status = store.status_counts("question")
    conversations = store.status_counts("conversation")
    counts = {
        "tasks in Label Studio": sum(task is not None for _, task in tasks.values()),
        "push unconfirmed (rerun push)": sum(task is None for _, task in tasks.values()),
        f"in review, waiting for {review.overlap} review(s) each (review.overlap)": pending["waiting"],
        "in review, flagged for adjudication": pending["flagged"],
        "in review, decided at next pull": pending["accepted"] + pending["rejected"],
        **{status: by_status.get(status, 0) for status in ("accepted", "rejected", "withdrawn")},
        **second_look_counts(store),
        **{f"conversations {status.replace('_', ' ')}": conversations.get(status, 0)
           for status in ("in_review", "accepted", "rejected", "published", "withdrawn") if conversations},
    }
    return counts, agreement(store)


def pull(store: Store, server: Server, settings: Settings, registry: Registry) -> PullReport:
    """Fetch the reviews of every kind and round (questions' first reviews and second looks,
    conversations), store them, then decide every item from what is stored."""
    from annotation import conversations
    from annotation.second_look import decide_second_looks

    review = settings.section("review", ReviewSettings)
    first = store.get_review_tasks("question")
    second = store.get_second_look_tasks().values()
    projects = {project for project, task in [*first.values(), *second] if task is not None}
    second_tasks = {task for _project, task in second}
    fetched, unreadable = fetch_reviews(server, projects, registry, review)
    new = store.add_reviews([r for r in fetched if r.question_id in first or r.task_id in second_tasks])
    new_versions, unreadable_versions = conversations.fetch_into(store, server, review)
    report = PullReport(new_reviews=new + new_versions, unreadable=unreadable + unreadable_versions,
                        outcomes=lifecycle.reconcile(store, Questions(review, registry)),
                        conversations=lifecycle.reconcile(store, conversations.Conversations.of(settings)),
                        agreement=agreement(store))
    report.second_looks = decide_second_looks(store, review, registry)
    return report
