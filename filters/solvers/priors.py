"""Option priors: solvers that look only at the shape of the question and options.

A good question gives them nothing to go on. They catch what question writers (people or LLMs) leave
behind: a correct option longer than the rest, one that repeats the question's words, or one that
stands apart from three distractors made alike, or one that the three distractors were all made from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from benchsmith.similarity import jaccard
from filters.solvers.base import BaseSolver, Prediction, Query
from generators.quality import centroid, words

if TYPE_CHECKING:  # annotations only: the settings model builds this solver
    from filters.solvers import PriorConfig


def longest(query: Query, ignore: frozenset[str]) -> list[float]:
    return [math.log(1 + len(option.strip())) for option in query.options]


def overlap(query: Query, ignore: frozenset[str]) -> list[float]:
    asked = words(query.text, ignore)
    return [len(w & asked) / len(w) if w else 0.0 for w in (words(o, ignore) for o in query.options)]


def odd_one_out(query: Query, ignore: frozenset[str]) -> list[float]:
    """Mean distance to the other options: words not shared, plus the difference in log length, so
    one short, plain option among three long ones stands out as much as one off-topic word does."""
    sets = [words(o, ignore) for o in query.options]
    lengths = [math.log(1 + len(o.strip())) for o in query.options]

    def distance(i: int, j: int) -> float:
        shared = jaccard(sets[i], sets[j]) if sets[i] or sets[j] else 1.0
        return 1 - shared + abs(lengths[i] - lengths[j])

    n = len(sets)
    return [sum(distance(i, j) for j in range(n) if j != i) / (n - 1) for i in range(n)]


SCORERS = {"longest": longest, "overlap": overlap, "odd_one_out": odd_one_out,
           "centroid": lambda query, ignore: centroid(query.options, ignore)}


class PriorSolver(BaseSolver):
    def __init__(self, config: PriorConfig) -> None:
        super().__init__(config)
        self._score = SCORERS[config.kind]
        self._ignore = frozenset(w.casefold() for w in config.ignore_words)

    def answer(self, queries: Sequence[Query]) -> list[Prediction]:
        return [self.predict(self._score(query, self._ignore)) for query in queries]
