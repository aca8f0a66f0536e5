"""Reviewed questions against what the generators wrote: the main sign of a broken generator (or of
careless annotators) is a high rate of answers the annotators changed, or of discarded questions.

`generator_signal` is a pure function over records; `review_signal` reads its inputs from the store.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from benchsmith.dimensions import Registry
from benchsmith.records import Question
from benchsmith.store import Store

COLUMNS = ["dimension", "generator", "reviewed", "answer changed", "dimension changed", "discarded",
           "discard reasons"]
STAGE = "review"


def generator_label(question: Question) -> str:
    provenance = question.provenance
    return f"{provenance.backend} ({provenance.model})" if provenance.model else provenance.backend


def _share(n: int, of: int) -> str:
    return f"{n} ({n / of:.0%})" if of else "0"


def generator_signal(questions: Iterable[Question], discarded: Mapping[str, Sequence[str]],
                     dimensions: Registry) -> list[list[object]]:
    """Rows of COLUMNS per generated dimension and generator, then one over all. A question counts once
    review has decided it: kept (it has a reviewed answer) or discarded (`discarded` maps its id to the
    reasons the annotators gave). Rates are over the reviewed questions of the row."""
    groups: dict[tuple[int, str], list[Question]] = {}
    decided = []
    for q in questions:
        if q.review_answer is not None or q.id in discarded:
            groups.setdefault((q.dimension_id, generator_label(q)), []).append(q)
            decided.append(q)

    def row(dimension: str, generator: str, group: list[Question]) -> list[object]:
        kept = [q for q in group if q.id not in discarded]
        reasons = Counter(r for q in group if q.id in discarded for r in discarded[q.id] or ["no reason given"])
        return [dimension, generator, len(group),
                _share(sum(q.review_answer != q.answer for q in kept), len(kept)),
                _share(sum(q.review_dimension_id not in (None, q.dimension_id) for q in kept), len(kept)),
                _share(len(group) - len(kept), len(group)),
                ", ".join(f"{reason} {n}" for reason, n in reasons.most_common()) or "-"]

    rows = [row(f"{dimension} {dimensions.get(dimension).name}", generator, group)
            for (dimension, generator), group in sorted(groups.items())]
    if decided:
        rows.append(row("all", "all", decided))
    return rows


def discard_reasons(store: Store) -> dict[str, list[str]]:
    """Question id -> the reasons annotators gave, for questions review rejected."""
    rejected = {q.id for q in store.get_questions(status="rejected")}
    return {v.subject_id: list(v.details.get("reasons", []))
            for v in store.get_verdicts(stage=STAGE, passed=False, subject_kind="question")
            if v.subject_id in rejected and "reasons" in v.details}


def review_signal(store: Store, dimensions: Registry) -> list[list[object]]:
    """`generator_signal` over every question review has decided so far."""
    discarded = discard_reasons(store)
    kept = store.get_questions(status=["accepted", "published"])
    return generator_signal([*kept, *store.get_questions(ids=sorted(discarded))], discarded, dimensions)
