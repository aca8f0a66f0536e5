"""What every solver shares: the question it sees (`Query`), what it answers (`Prediction`), the protocol
(`Solver`), the tie rule (`choose`) and `BaseSolver`. The settings models in `filters.solvers` build the
solvers; the solvers import only this module, so the two never import each other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: the settings models build the solvers
    from filters.solvers import SolverConfig


@dataclass(frozen=True)
class Query:
    """A question as a blind solver sees it."""

    text: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class Prediction:
    """The option a solver chose (an index into the options it was shown) and a score per option."""

    choice: int
    scores: tuple[float, ...]


class Solver(Protocol):
    name: str

    def answer(self, queries: Sequence[Query]) -> list[Prediction | None]:
        """One prediction per query, in order; None where it could not answer now (a failed call),
        which leaves the question for a later run."""

    def release(self) -> None:
        """Free any loaded model; the next `answer` loads it again."""

    # A solver that learns from the questions themselves (`learned`, `real_word`) also has
    # `fit(pool: Sequence[Labelled])`, called with every question past the quality gate before it answers.


def choose(scores: Sequence[float], tie_margin: float = 0.0) -> int:
    """The best-scoring option; options within `tie_margin` of the best count as tied, and a tie goes
    to the first one shown, so under rotated option orders an unsure solver does not answer consistently."""
    best = max(scores)
    return next(i for i, s in enumerate(scores) if s >= best - tie_margin)


class BaseSolver:
    """What the solvers share: their settings and name, a prediction from per-option scores, and (unless
    they hold a model) nothing to release."""

    def __init__(self, config: SolverConfig) -> None:
        self.config = config
        self.name = config.label

    def predict(self, scores: Sequence[float]) -> Prediction:
        return Prediction(choose(scores, self.config.tie_margin), tuple(scores))

    def release(self) -> None:
        pass
