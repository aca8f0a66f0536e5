"""Evaluation protocols: what a model is shown of each item, how its answers score, and the board.

A protocol is a subclass of `evaluation.contract.BaseProtocol` (of `Protocol` for a question protocol)
registered in the entry-point group `benchsmith.protocols` (benchsmith/plugins.py); ours are registered
there as another package's would be. `evaluate.protocol` (or `eval run --protocol`) names it, and its own
settings, if it has any, live under `evaluate.<name>`.
The question protocols share the question machinery (evaluation/stage.py, board.py: the `Protocol`
defaults) and only say which passes a question gets and how they score:

- `single` (SEED-Bench): one pass, options in their published order, the first prompt template.
- `circular` (MMBench's CircularEval): one pass per rotation of the options; a question counts as
  right only if every rotation is answered right.
- `instability` (ReForm-Eval): `templates` prompt wordings x `shuffles` option orders. Accuracy is the
  share of right passes; instability is the entropy (natural log) of the distribution of the options a
  model chose across the passes, mapped back to the original options, averaged over questions. A
  model that always picks the same option has 0; one that scatters over four has up to ln 4 = 1.39.
A skipped pass (the model cannot take the question) is left out of every score; a format miss counts
as wrong, and as its own outcome in the entropy. `conveval` (evaluation/conveval.py) evaluates
conversations with a stage and a board of its own.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from benchsmith.records import rotation, stable_hash
from benchsmith.settings import Strict
from evaluation.board import write_board
from evaluation.contract import BaseProtocol
from evaluation.records import EvalQuestion, Pass
from evaluation.stage import plan_stage


class Protocol(BaseProtocol):
    """A protocol over the question machinery (evaluation/stage.py, board.py): it says only which passes
    each question gets and how they score."""

    def stage(self, store, settings, source, model: str):
        return plan_stage(store, settings, source, model, self)

    def board(self, store, settings, source, folder: Path) -> tuple[str, dict[str, Any], int]:
        return write_board(store, settings, source, folder)


class Single(Protocol):
    def passes(self, question: EvalQuestion) -> list[Pass]:
        return [Pass(question)]


class Circular(Protocol):
    def passes(self, question: EvalQuestion) -> list[Pass]:
        n = len(question.options)
        return [Pass(question, f"rot{r}", rotation(n, r)) for r in range(n)]

    def score(self, correct: Sequence[bool]) -> float:
        return float(all(correct))


class InstabilitySettings(Strict):
    templates: int = Field(3, ge=1)     # prompt wordings per question
    shuffles: int = Field(2, ge=1)      # option orders per wording
    seed: int = 0                       # the option shuffles


class Instability(Protocol):
    settings_model = InstabilitySettings
    instability = True

    def passes(self, question: EvalQuestion) -> list[Pass]:
        out = []
        for t in range(self.settings.templates):
            for s in range(self.settings.shuffles):
                order = list(range(len(question.options)))
                random.Random(stable_hash(self.settings.seed, question.question_id, t, s)).shuffle(order)
                out.append(Pass(question, f"t{t}s{s}", tuple(order), t))
        return out

    def templates(self) -> int:
        return self.settings.templates
