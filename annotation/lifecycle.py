"""One review lifecycle for every kind of benchmark item: from the stored reviews to where each item stands.

What differs per kind is small and lives in its strategy (`Kind`): which reviews count, how they decide
an item, and what a decision sets on it (a question's reviewed answer and dimension, a conversation's
reviewed turns). Everything else is here, once:

- an item in review is accepted (with what the reviews set), rejected, or held with a verdict saying why
  (a tie, an edit that breaks the item), or it waits for more reviews;
- an item decided before (accepted or published) is decided again from the reviews as they are now: an
  annotator who changes a kept annotation later, even after a release, revises the item. The revision is
  an event in its history (accepted -> accepted, published -> published) with what changed, so the next
  `publish` lists it as changed, with that reason, in the CHANGELOG. Discarded after all, it is withdrawn
  from the next release.

Each decision is a `human_review` verdict holding what it set, so a later pull revises an item only when
its reviews say something new, never because a second look changed it since.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from annotation.reconcile import Outcome
from benchsmith.records import Verdict, stable_hash
from benchsmith.store import Store

STAGE = "review"
RULE = "human_review"
DECIDED = ("accepted", "published")  # what a newer review can still revise or withdraw


@dataclass(frozen=True)
class Decision:
    """What an item's reviews say now. `reviewed` is what acceptance sets on the item (JSON-ready)."""

    outcome: Outcome
    reason: str = ""
    reviewed: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


class Kind(Protocol):
    """One kind of benchmark item under review."""

    name: str  # "question", "conversation": the store's kind and the verdicts' subject kind

    def items(self, store: Store, statuses: Sequence[str], ids: Sequence[str] | None = None) -> list:
        """The items of `kind` in these statuses (of those given)."""

    def reviews(self, store: Store, items: Sequence) -> dict[str, list]:
        """item id -> the reviews that decide it (each annotation's latest version; a question's first round only)."""

    def decide(self, item, reviews: Sequence) -> Decision: ...

    def reviewed(self, item) -> dict[str, Any]:
        """What the item carries now of what a decision sets (for items decided before verdicts held it)."""

    def revision(self, item, before: dict[str, Any], after: dict[str, Any]) -> str:
        """In words, for the history and the CHANGELOG: what a revision changed."""


def reconcile(store: Store, kind: Kind, ids: Sequence[str] | None = None) -> Counter:
    """Decide every item of `kind` in review (of those given), and revise or withdraw decided ones whose
    reviews changed; return how many ended how (accepted, rejected, flagged, waiting; revised, withdrawn)."""
    items = kind.items(store, ["in_review", *DECIDED], ids)
    reviews = kind.reviews(store, items)
    last = {v.subject_id: v for v in store.get_verdicts(stage=STAGE, subject_kind=kind.name) if v.rule == RULE}
    counts: Counter = Counter()
    moves: dict[tuple, list[tuple[str, Verdict]]] = {}
    held: list[Verdict] = []
    for item in items:
        decision = kind.decide(item, reviews.get(item.id, []))
        verdict = Verdict(subject_id=item.id, subject_kind=kind.name, stage=STAGE, rule=RULE,
                          passed=decision.outcome == "accepted", reason=decision.reason,
                          details=decision.details | ({"reviewed": decision.reviewed} if decision.reviewed else {}))
        if item.status == "in_review":
            counts[decision.outcome] += 1
            if decision.outcome in ("accepted", "rejected"):
                # one move per same outcome, reason and reviewed fields: a pull decides thousands at once
                group = (decision.outcome, decision.reason, stable_hash(decision.reviewed))
                moves.setdefault(group, []).append((item.id, verdict))
            elif decision.outcome == "flagged":
                held.append(verdict)
            continue
        previous = last.get(item.id)
        before = previous.details["reviewed"] if previous and "reviewed" in previous.details else kind.reviewed(item)
        if decision.outcome == "accepted" and decision.reviewed != before:
            reason = kind.revision(item, before, decision.reviewed)
            store.move(kind.name, [item.id], item.status, stage=STAGE, reason=reason, updates=decision.reviewed,
                       verdicts_to_add=[verdict.model_copy(update={"reason": reason})])
            counts["revised"] += 1
        elif decision.outcome == "rejected" and (previous is None or previous.passed):
            reason = "withdrawn in review: " + decision.reason
            store.move(kind.name, [item.id], "withdrawn", stage=STAGE, reason=reason,
                       verdicts_to_add=[verdict.model_copy(update={"reason": reason})])
            counts["withdrawn"] += 1
    for (outcome, reason, _reviewed), group in moves.items():
        reviewed = group[0][1].details.get("reviewed")
        store.move(kind.name, [i for i, _v in group], outcome, stage=STAGE, reason=reason, updates=reviewed,
                   verdicts_to_add=[v for _i, v in group])
    store.add_verdicts(held)
    return counts
