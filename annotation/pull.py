"""Bring annotations back from Label Studio and turn them into item outcomes.

A pull is three runner stages over what the server holds now: first-round reviews of questions
(`review:pull`), second looks (`review:pull:second_look`) and conversations (`review:pull:conversations`).
A unit is one version of one annotation, so a pull with nothing new does nothing, and an annotation
revised in Label Studio is pulled once. Each version is stored before the items it reviews are decided
again from every stored review, so a pull that fails half-way loses nothing the server gave us.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from annotation import lifecycle
from annotation.client import Server, read_annotations
from annotation.labeling import to_review
from annotation.questions import Questions
from annotation.reconcile import Agreement, agreement_by_dimension
from annotation.second_look import SecondLooks, second_look_counts
from annotation.settings import ReviewSettings
from benchsmith import runner
from benchsmith.dimensions import Registry
from benchsmith.records import Review, ReviewVersion
from benchsmith.settings import Settings, keyed
from benchsmith.store import Store


@dataclass
class PullReport:
    pulled: int = 0       # annotation versions the pull stages did: each is pulled once
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
        return {"pulled": self.pulled, "new_reviews": self.new_reviews, "unreadable": len(self.unreadable), **{k: self.outcomes[k] for k in
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


def agreement(store: Store) -> dict[str, dict[str, Agreement]]:
    """κ over every stored review of a first round, per dimension (second looks are another question:
    whether a published answer survives the models' doubt)."""
    second_looks = {task for _project, task in store.get_second_look_tasks().values()}
    reviews = [r for r in store.get_reviews() if r.task_id not in second_looks]
    questions = store.get_questions(ids=sorted({r.question_id for r in reviews}))
    return agreement_by_dimension(questions, reviews)


def review_status(store: Store, settings: Settings) -> tuple[dict[str, int], dict[str, dict[str, Agreement]], list]:
    """For `benchsmith review status`, read from the store without changing it: counts, agreement, and the
    questions in review whose reviews tie, each with its decision and its (project, task) on the server."""
    from benchsmith.dimensions import registry

    review = settings.section("review", ReviewSettings)
    tasks = store.get_review_tasks("question")
    now = lifecycle.decided_now(store, Questions(review, registry()))
    pending = Counter(decision.outcome for _question, decision in now)
    tied = [(q, d, tasks.get(q.id, (0, None))) for q, d in now if d.outcome == "flagged"]
    by_status = store.status_counts("question")
    conversations = store.status_counts("conversation")
    counts = {
        "tasks in Label Studio": sum(task is not None for _, task in tasks.values()),
        "push unconfirmed (rerun push)": sum(task is None for _, task in tasks.values()),
        f"in review, waiting for {review.overlap} review(s) each (review.overlap)": pending["waiting"],
        "in review, flagged for adjudication": pending["flagged"],
        "in review, decided at next pull": pending["accepted"] + pending["rejected"],
        **{status: by_status.get(status, 0) for status in ("accepted", "rejected", "withdrawn")},
        **second_look_counts(store, review),
        **{f"conversations {status.replace('_', ' ')}": conversations.get(status, 0)
           for status in ("in_review", "accepted", "rejected", "published", "withdrawn") if conversations},
    }
    return counts, agreement(store), tied


@dataclass
class PullStage(runner.Stage):
    """Review versions from Label Studio as a runner stage: a unit is one version of one annotation (its id
    hashes what the annotation says and when it was saved). Committing stores the versions, then `decide`
    decides again the items they review; the config key is what that decision reads from the settings, so
    changing it decides again exactly the items this stage pulled reviews of. One window: a rule over an
    item's reviews sees all of them."""

    name: str
    versions: Sequence[ReviewVersion]
    key: str
    decide: Callable[[Store, list[str]], Counter]  # (store, item ids) -> how many ended how

    def config_key(self) -> str:
        return self.key

    def units(self, _context: runner.StageContext) -> Sequence[ReviewVersion]:
        return self.versions

    def subject(self, version: ReviewVersion) -> str:
        return version.id

    def windows(self) -> tuple[int, int | None]:
        return max(1, len(self.versions)), None

    def process(self, units: Sequence[ReviewVersion], _context) -> Iterator[tuple[ReviewVersion, None]]:
        yield from ((version, None) for version in units)

    def commit(self, context: runner.StageContext, pairs: list, report: runner.StageReport) -> list[runner.Outcome]:
        versions = [version for version, _ in pairs]
        report.counters["new_reviews"] += context.store.add_reviews(versions)
        report.counters.update(self.decide(context.store, sorted({v.subject_id for v in versions})))
        return [runner.Outcome(v.id, "done") for v in versions]


STILL_OUT = ("flagged", "waiting")  # where an item in review stands after a pull, whatever the pull did


def moved(done: dict[str, Any], outcomes: Sequence[str] = ("accepted", "rejected", "revised", "withdrawn")) -> Counter:
    """What a pull stage's run (its report as a dict, or `cached`) decided, of these outcomes."""
    return Counter({outcome: done.get(outcome, 0) for outcome in outcomes})


def pull(store: Store, server: Server, settings: Settings, registry: Registry,
         run: Callable[[runner.Stage], dict[str, Any]] | None = None) -> PullReport:
    """Fetch the reviews of every kind and round (questions' first reviews and second looks,
    conversations) and run their pull stages: `run(stage)` (default: the runner, here) returns the
    stage's report as a dict (the finish flow runs each as its Prefect task, `{"cached": True}` when
    nothing is new)."""
    from annotation import conversations

    review = settings.section("review", ReviewSettings)
    first = store.get_review_tasks("question")
    second = store.get_second_look_tasks().values()
    projects = {project for project, task in [*first.values(), *second] if task is not None}
    second_tasks = {task for _project, task in second}
    fetched, unreadable = fetch_reviews(server, projects, registry, review)
    talks, unreadable_talks = conversations.fetch(store, server, review)
    questions, looks, talk = Questions(review, registry), SecondLooks(review, registry), conversations.Conversations.of(settings)
    run = run or (lambda stage: runner.run(stage, store).as_dict())
    firsts, looked, talked = (run(stage) for stage in [
        PullStage("review:pull", [r for r in fetched if r.task_id not in second_tasks and r.question_id in first],
                  runner.config_key(review.overlap), lambda s, ids: lifecycle.reconcile(s, questions, ids)),
        PullStage("review:pull:second_look", [r for r in fetched if r.task_id in second_tasks],
                  runner.config_key(review.second_look_overlap),
                  lambda s, ids: lifecycle.reconcile(s, looks, ids)),
        PullStage("review:pull:conversations", talks, runner.config_key(keyed(talk.quality)),
                  lambda s, ids: lifecycle.reconcile(s, talk, ids))])
    out = lifecycle.standing(store, looks)  # a tie on a second look is no majority, not another flag
    runs = (firsts, looked, talked)
    return PullReport(pulled=sum(done.get("done", 0) for done in runs),
                      new_reviews=sum(done.get("new_reviews", 0) for done in runs),
                      unreadable=unreadable + unreadable_talks,
                      outcomes=moved(firsts) + moved(lifecycle.standing(store, questions), STILL_OUT),
                      conversations=moved(talked) + moved(lifecycle.standing(store, talk), STILL_OUT),
                      second_looks=moved(looked, ("confirmed", "changed", "withdrawn"))
                      + Counter(waiting=out["waiting"], **{"no majority": out["flagged"]}), agreement=agreement(store))
