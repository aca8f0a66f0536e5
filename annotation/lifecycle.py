"""One review lifecycle for every kind of benchmark item and round of review: from the stored reviews to
where each item stands.

What differs per kind and round is small and lives in its strategy (`Kind`): which items are open, which
reviews count, how they decide an item, and what a decision does to it (a question's reviewed answer and
dimension, a conversation's reviewed turns; a second look's confirmation, change or withdrawal of a
published question, annotation/second_look.py). Everything else is here, once. In the first round:

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
from dataclasses import dataclass, field, replace
from typing import Any

from annotation.reconcile import Decision
from benchsmith.records import Verdict, stable_hash
from benchsmith.store import Store

STAGE = "review"
RULE = "human_review"
DECIDED = ("accepted", "published")  # what a newer review can still revise or withdraw


@dataclass(frozen=True)
class Move:
    """What a decision does to an open item: how the pull counts it, the status it moves to (None: it stays
    where it is, with a verdict saying why), why, and what it sets. The verdict keeps `details`."""

    outcome: str
    to_status: str | None
    reason: str
    passed: bool
    updates: dict[str, Any] | None = None
    details: dict[str, Any] = field(default_factory=dict)


class Kind:
    """One kind of benchmark item in one round of review. The defaults are the first round, the same for
    every kind: items in review are accepted, rejected or held (a tie), and items decided before are
    revised or withdrawn by newer reviews. A kind adds `name` (the store's kind and the verdicts' subject
    kind), `items`, `reviews`, `decide`, `reviewed` and `revision`; a later round (a second look) overrides
    which items are open and what a decision does to them."""

    name: str
    stage, rule = STAGE, RULE  # of the verdicts that record its decisions

    def items(self, store: Store, statuses: Sequence[str], ids: Sequence[str] | None = None) -> list:
        """The items in these statuses (of those given); each has an `id`."""
        raise NotImplementedError

    def open(self, store: Store, ids: Sequence[str] | None = None) -> list:
        """The items (of those given) waiting for a decision in this round."""
        return self.items(store, ["in_review"], ids)

    def revisable(self, store: Store, ids: Sequence[str] | None = None) -> list:
        """The items (of those given) decided before that newer reviews may revise or withdraw."""
        return self.items(store, list(DECIDED), ids)

    def reviews(self, store: Store, items: Sequence) -> dict[str, list]:
        """item id -> the reviews that decide it in this round."""
        raise NotImplementedError

    def decide(self, item, reviews: Sequence) -> Decision:
        raise NotImplementedError

    def settle(self, item, decision: Decision) -> Move | None:
        """What the decision does to an open item; None while it waits."""
        if decision.outcome == "waiting":
            return None
        return Move(decision.outcome, decision.outcome if decision.outcome != "flagged" else None, decision.reason,
                    decision.outcome == "accepted", decision.reviewed or None,
                    decision.details | ({"reviewed": decision.reviewed} if decision.reviewed else {}))

    def reviewed(self, item) -> dict[str, Any]:
        """What the item carries now of what a decision sets (for items decided before verdicts held it)."""
        raise NotImplementedError

    def revision(self, item, before: dict[str, Any], after: dict[str, Any]) -> str:
        """In words, for the history and the CHANGELOG: what a revision changed."""
        raise NotImplementedError


def reconcile(store: Store, kind: Kind, ids: Sequence[str] | None = None) -> Counter:
    """Decide every open item of `kind` (of those given), and revise or withdraw decided ones whose reviews
    changed; return how many ended how (the kind's outcomes, waiting; revised, withdrawn)."""
    pending, decided = kind.open(store, ids), kind.revisable(store, ids)
    reviews = kind.reviews(store, [*pending, *decided])
    counts: Counter = Counter()
    moves: dict[tuple, tuple[Move, list[tuple[str, Verdict]]]] = {}
    held: list[Verdict] = []

    def verdict(item, move: Move) -> Verdict:
        return Verdict(subject_id=item.id, subject_kind=kind.name, stage=kind.stage, rule=kind.rule,
                       passed=move.passed, reason=move.reason, details=move.details)

    for item in pending:
        decision = kind.decide(item, reviews.get(item.id, []))
        move = kind.settle(item, decision)
        counts[move.outcome if move else decision.outcome] += 1
        if move is None:
            continue
        if move.to_status is None:
            held.append(verdict(item, move))
        else:  # one store move per same status, reason and updates: a pull decides thousands at once
            group = (move.to_status, move.reason, stable_hash(move.updates))
            moves.setdefault(group, (move, []))[1].append((item.id, verdict(item, move)))
    last = {v.subject_id: v for v in store.get_verdicts(
        stage=kind.stage, subject_kind=kind.name, subject_ids=None if ids is None else [item.id for item in decided])
            if v.rule == kind.rule} if decided else {}
    for item in decided:
        decision = kind.decide(item, reviews.get(item.id, []))
        previous = last.get(item.id)
        before = previous.details["reviewed"] if previous and "reviewed" in previous.details else kind.reviewed(item)
        if decision.outcome == "accepted" and decision.reviewed != before:
            to_status, reason = item.status, kind.revision(item, before, decision.reviewed)
            counts["revised"] += 1
        elif decision.outcome == "rejected" and (previous is None or previous.passed):
            to_status, reason = "withdrawn", "withdrawn in review: " + decision.reason
            counts["withdrawn"] += 1
        else:
            continue
        move = kind.settle(item, decision)
        store.move(kind.name, [item.id], to_status, stage=kind.stage, reason=reason, updates=move.updates,
                   verdicts_to_add=[verdict(item, replace(move, reason=reason))])
    for move, group in moves.values():
        store.move(kind.name, [i for i, _v in group], move.to_status, stage=kind.stage, reason=move.reason,
                   updates=move.updates, verdicts_to_add=[v for _i, v in group])
    store.add_verdicts(held)
    return counts


def decided_now(store: Store, kind: Kind) -> list[tuple[Any, Decision]]:
    """Each open item of `kind` with what its reviews say now, without deciding it."""
    items = kind.open(store)
    reviews = kind.reviews(store, items)
    return [(item, kind.decide(item, reviews.get(item.id, []))) for item in items]


def standing(store: Store, kind: Kind) -> Counter:
    """How the open items of `kind` stand now, without deciding them (waiting, flagged, ...)."""
    return Counter(decision.outcome for _item, decision in decided_now(store, kind))
