"""Text-only baselines: the blind filter's solvers answering the evaluated questions without the image,
so the board shows how far above chance a model gets that never looks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pydantic import TypeAdapter, ValidationError

from evaluation.adapters.base import EvalError
from evaluation.records import EvalQuestion, ModelAnswer, Pass
from filters.solvers import AnySolverConfig, Query, build_solver

if TYPE_CHECKING:  # annotations only: the settings model builds this adapter
    from evaluation.adapters import BlindBaselineConfig


class BlindAdapter:
    def __init__(self, name: str, config: BlindBaselineConfig, *, settings, store=None) -> None:
        self.name = name
        try:
            solver_config = TypeAdapter(AnySolverConfig).validate_python(config.solver)
        except ValidationError as exc:
            raise EvalError(f"evaluate.models.{name}.solver: {str(exc).splitlines()[0]} "
                            f"({exc.errors()[0]['msg']})") from None
        self.solver = build_solver(solver_config, settings=settings, store=store)

    def prepare(self, questions: Sequence[EvalQuestion]) -> None:
        """A solver that learns from the questions (`learned`) trains on the whole evaluated set, and
        answers each question with a model that never saw that question's image."""
        if hasattr(self.solver, "fit"):
            from filters.solvers.learned import Labelled
            self.solver.fit([Labelled(q.text, q.options, q.answer, q.image_id) for q in questions])

    def predict(self, passes: Sequence[Pass]) -> Iterator[tuple[Pass, ModelAnswer]]:
        predictions = self.solver.answer([Query(p.question.text, p.options) for p in passes])
        for p, prediction in zip(passes, predictions):
            if prediction is None:
                yield p, ModelAnswer(retry="the solver could not answer now")
            else:
                yield p, ModelAnswer(choice=prediction.choice, scores=prediction.scores, matched_by="blind")

    def release(self) -> None:
        self.solver.release()
