"""From several annotators' reviews to one decision per question, and how far annotators agree.

Pure functions over records: no server, no store.

A decision needs `overlap` reviews. Each choice (keep or discard, then the answer and the dimension
among those who kept the question) goes to a strict majority; without one (a tie, or votes spread over
several options) the question is flagged for adjudication and stays in review until more reviews break
the tie.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from benchsmith.records import Question, Review

Outcome = Literal["accepted", "rejected", "flagged", "waiting"]
ADJUDICATION = "needs adjudication"  # the reason of a tie's verdict: not a failure, it waits for one more review


@dataclass(frozen=True)
class Decision:
    """What an item's reviews say now, for any kind of item (annotation/lifecycle.py). `reviewed` is what
    acceptance sets on the item (JSON-ready); `details` go into the verdict."""

    outcome: Outcome
    reason: str = ""
    reviewed: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


def majority(votes: Sequence[Hashable | None]) -> Hashable | None:
    """The value more than half of `votes` name; None (an abstention) never wins."""
    counts = Counter(v for v in votes if v is not None)
    if not counts:
        return None
    value, n = counts.most_common(1)[0]
    return value if n * 2 > len(votes) else None


def decide(question: Question, reviews: Sequence[Review], overlap: int) -> Decision:
    n = len(reviews)
    if n == 0 or n < overlap:
        return Decision("waiting")
    keep = majority([r.keep for r in reviews])
    if keep is None:
        return flagged(("keep or discard",), n)
    if not keep:
        named = Counter(reason for r in reviews if not r.keep for reason in r.reasons)
        reasons = [reason for reason, _ in named.most_common()]
        return Decision("rejected", "discarded: " + (", ".join(reasons) or "no reason given"), details={
            "reasons": reasons, "comments": [r.comment for r in reviews if not r.keep and r.comment]})
    keepers = [r for r in reviews if r.keep]
    answer = majority([r.answer for r in keepers])
    dimension = majority([r.dimension_id for r in keepers])
    unsettled = tuple(what for what, value in (("answer", answer), ("dimension", dimension)) if value is None)
    if unsettled:
        return flagged(unsettled, n)
    return Decision("accepted", "kept by the annotators' majority",
                    {"review_answer": answer, "review_dimension_id": dimension})


def flagged(unsettled: Sequence[str], n_reviews: int) -> Decision:
    """A tie: the item waits in review for a deciding annotation."""
    return Decision("flagged", f"{ADJUDICATION}: no majority on " + " and ".join(unsettled),
                    details={"unsettled": list(unsettled), "n_reviews": n_reviews})


@dataclass(frozen=True)
class Agreement:
    method: Literal["cohen", "fleiss", "none"]
    kappa: float | None  # None when undefined: too few items, or every rating in one category
    n_items: int
    raters: tuple[str, ...] = field(default=())

    def show(self) -> str:
        if self.kappa is None:
            return f"n/a ({self.n_items} items)"
        return f"{self.kappa:.3f} {self.method} ({self.n_items} items)"


def kappa(ratings: Mapping[str, Mapping[str, Hashable]]) -> Agreement:
    """Chance-corrected agreement over items rated at least twice (item -> {rater: category}).

    Cohen's κ when the same two raters rated every item; otherwise Fleiss' κ, in its form that allows
    a different number of raters per item.
    """
    rated = {item: by for item, by in ratings.items() if len(by) >= 2}
    raters = tuple(sorted({rater for by in rated.values() for rater in by}))
    if not rated:
        return Agreement("none", None, 0, raters)
    if len(raters) == 2 and all(len(by) == 2 for by in rated.values()):
        return Agreement("cohen", _cohen([(by[raters[0]], by[raters[1]]) for by in rated.values()]), len(rated), raters)
    return Agreement("fleiss", _fleiss([list(by.values()) for by in rated.values()]), len(rated), raters)


def _cohen(pairs: list[tuple[Hashable, Hashable]]) -> float | None:
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[c] * second[c] for c in first) / (n * n)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def _fleiss(items: list[list[Hashable]]) -> float | None:
    totals: Counter = Counter()
    per_item = []
    for labels in items:
        counts = Counter(labels)
        totals.update(counts)
        k = len(labels)
        per_item.append((sum(c * c for c in counts.values()) - k) / (k * (k - 1)))
    observed = sum(per_item) / len(per_item)
    all_ratings = sum(totals.values())
    expected = sum((c / all_ratings) ** 2 for c in totals.values())
    return None if expected == 1 else (observed - expected) / (1 - expected)


def agreement_by_dimension(questions: Iterable[Question], reviews: Iterable[Review]) -> dict[str, dict[str, Agreement]]:
    """κ for the answer and for keep/discard, per generator dimension and over all ("all").

    The answer counts wherever an annotator picked one, also on a question they then discarded.
    """
    dimension_of = {q.id: q.dimension_id for q in questions}
    answers: dict[str, dict[str, dict[str, Hashable]]] = {}
    keeps: dict[str, dict[str, dict[str, Hashable]]] = {}
    for r in reviews:
        if r.question_id not in dimension_of:
            continue
        for group in (str(dimension_of[r.question_id]), "all"):
            keeps.setdefault(group, {}).setdefault(r.question_id, {})[r.annotator] = r.keep
            if r.answer is not None:
                answers.setdefault(group, {}).setdefault(r.question_id, {})[r.annotator] = r.answer
    return {group: {"answer": kappa(answers.get(group, {})), "keep": kappa(keeps[group])} for group in keeps}
