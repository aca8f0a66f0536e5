"""Bring annotations back from Label Studio and turn them into question outcomes.

Reviews are stored first, so a pull that fails half-way loses nothing the server gave us, and deciding
again from the stored reviews gives the same outcome.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from annotation.client import Server, submitted_annotations
from annotation.labeling import to_review
from annotation.reconcile import ADJUDICATION, Agreement, Decision, agreement_by_dimension, decide
from annotation.settings import ReviewSettings
from benchsmith.dimensions import Registry
from benchsmith.records import Question, Review, Verdict
from benchsmith.settings import Settings
from benchsmith.store import Store

STAGE = "review"
RULE = "human_review"


@dataclass
class PullReport:
    new_reviews: int = 0
    unreadable: list[str] = field(default_factory=list)  # annotations that fit no choice of the config
    outcomes: Counter = field(default_factory=Counter)
    agreement: dict[str, dict[str, Agreement]] = field(default_factory=dict)
    second_looks: Counter = field(default_factory=Counter)  # annotation/second_look.py's outcomes of this pull

    def summary(self) -> str:
        first = f", first: {self.unreadable[0]}" if self.unreadable else ""
        return pull_line(self.as_dict()) + first

    def as_dict(self) -> dict:
        return {"new_reviews": self.new_reviews, "unreadable": len(self.unreadable), **{k: self.outcomes[k] for k in
                ("accepted", "rejected", "flagged", "waiting")},
                "kappa": {group: {what: a.kappa for what, a in by.items()} for group, by in self.agreement.items()},
                "second_looks": dict(self.second_looks)}


def pull_line(counts: dict) -> str:
    """One line on a pull, from `PullReport.as_dict()` (which is also what the finish flow returns)."""
    unreadable = f"; {counts['unreadable']} annotations not understood" if counts["unreadable"] else ""
    looks = counts.get("second_looks") or {}
    second = ("; second looks: " + ", ".join(f"{n} {outcome}" for outcome, n in sorted(looks.items()))) if looks else ""
    return (f"{counts['new_reviews']} new reviews; decided now: {counts['accepted']} accepted, {counts['rejected']} "
            f"rejected; still in review: {counts['flagged']} tied (waiting for a deciding annotation), "
            f"{counts['waiting']} waiting for reviews{unreadable}{second}")


def fetch_reviews(server: Server, project_ids: set[int], registry: Registry,
                  review: ReviewSettings) -> tuple[list[Review], list[str]]:
    """Every submitted (not skipped) annotation in these projects, as Reviews; and why any could not be
    read (a choice the current config does not have), so one odd annotation does not stop a pull."""
    out: list[Review] = []
    unreadable: list[str] = []
    for task, annotation in submitted_annotations(server, project_ids, "question_id"):
        try:
            out.append(to_review(task, annotation, registry, review))
        except ValueError as exc:
            unreadable.append(str(exc))
    return out, unreadable


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
    tasks = store.get_review_tasks([d.question_id for d in ties])
    return [(questions[d.question_id], d, tasks.get(d.question_id, (0, None))) for d in ties]


def agreement(store: Store) -> dict[str, dict[str, Agreement]]:
    """κ over every stored review of a first round, per dimension (second looks are another question:
    whether a published answer survives the models' doubt)."""
    second_looks = {task for _project, task in store.get_second_look_tasks().values()}
    reviews = [r for r in store.get_reviews() if r.task_id not in second_looks]
    questions = store.get_questions(ids=sorted({r.question_id for r in reviews}))
    return agreement_by_dimension(questions, reviews)


def reconcile(store: Store, review: ReviewSettings) -> PullReport:
    """Decide every question in review from its stored reviews and record the outcomes."""
    decisions = decisions_in_review(store, review)
    _record(store, decisions)
    return PullReport(outcomes=Counter(d.outcome for d in decisions), agreement=agreement(store))


def review_status(store: Store, settings: Settings) -> tuple[dict[str, int], dict[str, dict[str, Agreement]]]:
    """Counts for `benchsmith review status`, read from the store without changing it."""
    from annotation.second_look import second_look_counts

    review = settings.section("review", ReviewSettings)
    tasks = store.get_review_tasks()
    pending = Counter(d.outcome for d in decisions_in_review(store, review))
    by_status = Counter()
    for (_dimension, status), n in store.question_counts().items():
        by_status[status] += n
    counts = {
        "tasks in Label Studio": sum(task is not None for _, task in tasks.values()),
        "push unconfirmed (rerun push)": sum(task is None for _, task in tasks.values()),
        f"in review, waiting for {review.overlap} review(s) each (review.overlap)": pending["waiting"],
        "in review, flagged for adjudication": pending["flagged"],
        "in review, decided at next pull": pending["accepted"] + pending["rejected"],
        "accepted": by_status["accepted"],
        "rejected": by_status["rejected"],
        **second_look_counts(store),
    }
    return counts, agreement(store)


def pull(store: Store, server: Server, settings: Settings, registry: Registry) -> PullReport:
    """Fetch the reviews of every round (first reviews and second looks), then decide both."""
    from annotation.second_look import decide_second_looks

    review = settings.section("review", ReviewSettings)
    first = store.get_review_tasks()
    second = store.get_second_look_tasks().values()
    projects = {project for project, task in [*first.values(), *second] if task is not None}
    second_tasks = {task for _project, task in second}
    fetched, unreadable = fetch_reviews(server, projects, registry, review)
    new = store.add_reviews([r for r in fetched if r.question_id in first or r.task_id in second_tasks])
    report = reconcile(store, review)
    report.second_looks = decide_second_looks(store, review, registry)
    report.new_reviews, report.unreadable = new, unreadable
    return report


def _record(store: Store, decisions: list[Decision]) -> None:
    accepted: dict[tuple[int, int], list[str]] = {}
    for d in decisions:
        if d.outcome == "accepted":
            accepted.setdefault((d.answer, d.dimension_id), []).append(d.question_id)
    for (answer, dimension_id), ids in accepted.items():
        store.move_questions(ids, "accepted", stage=STAGE, reason="kept by the annotators' majority",
                             updates={"review_answer": answer, "review_dimension_id": dimension_id},
                             verdicts_to_add=[_verdict(qid, True, "accepted", {}) for qid in ids])
    rejected: dict[str, list[Decision]] = {}
    for d in decisions:
        if d.outcome == "rejected":
            rejected.setdefault("discarded: " + (", ".join(d.reasons) or "no reason given"), []).append(d)
    for reason, group in rejected.items():
        store.move_questions([d.question_id for d in group], "rejected", stage=STAGE, reason=reason, verdicts_to_add=[
            _verdict(d.question_id, False, reason, {"reasons": list(d.reasons), "comments": list(d.comments)})
            for d in group])
    store.add_verdicts([_verdict(d.question_id, False, f"{ADJUDICATION}: no majority on " + " and ".join(d.reasons),
                                 {"unsettled": list(d.reasons), "n_reviews": d.n_reviews})
                        for d in decisions if d.outcome == "flagged"])


def _verdict(question_id: str, passed: bool, reason: str, details: dict) -> Verdict:
    return Verdict(subject_id=question_id, subject_kind="question", stage=STAGE, rule=RULE, passed=passed,
                   reason=reason, details=details)
