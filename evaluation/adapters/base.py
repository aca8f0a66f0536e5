"""What every model adapter shares: the protocol (`Adapter`) and the error that stops an evaluation
(`EvalError`). The settings models in `evaluation.adapters` build the adapters; the adapters import
only this module, so the two never import each other."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from benchsmith.errors import BenchsmithError
from evaluation.records import ModelAnswer, Pass


class EvalError(BenchsmithError, RuntimeError):
    """Evaluation cannot go on as configured; the message says why and what to do."""


class Adapter(Protocol):
    name: str

    def predict(self, passes: Sequence[Pass]) -> Iterator[tuple[Pass, ModelAnswer]]: ...

    def release(self) -> None:
        """Free any loaded model."""
