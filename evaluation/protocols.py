"""Evaluation protocols: what a model is shown of each item, how its answers score, and the board.

A protocol is a `Protocol` subclass registered in the entry-point group `benchsmith.protocols`
(benchsmith/plugins.py); ours are registered there as another package's would be. `evaluate.protocol`
(or `eval run --protocol`) names it, and its own settings, if it has any, live under `evaluate.<name>`.
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

import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from benchsmith import plugins
from benchsmith.records import rotation, stable_hash
from benchsmith.settings import NoSettings, Strict
from evaluation.records import EvalQuestion, Pass
from evaluation.settings import EvalSettings
from evaluation.sources import Kind


class Protocol:
    """An evaluation protocol under its settings (`settings_model` validates `evaluate.<name>`).

    `items` is the kind of item it evaluates. `stage` plans the runner stage that evaluates one model on a
    source and records its run; `board` writes the board of every run on a source into a folder and
    returns (markdown, JSON-able data, how many runs it shows). By default these are the question
    machinery's, which asks of a protocol only how each question is shown to a model (`passes`) and how
    its scored passes fold into the question's score (`score`: the share right, unless overridden);
    `templates` says how many prompt wordings its passes use, `instability` whether the board reports the
    spread of a model's choices over a question's passes."""

    settings_model: type[BaseModel] = NoSettings
    items: Kind = "questions"
    instability: bool = False

    def __init__(self, settings: BaseModel, name: str = "") -> None:
        self.settings = settings
        self.name = name or type(self).__name__.lower()

    def stage(self, store, settings, source, model: str):
        from evaluation.stage import plan_stage  # the question machinery imports this module

        return plan_stage(store, settings, source, model, self)

    def board(self, store, settings, source, folder: Path) -> tuple[str, dict[str, Any], int]:
        from evaluation.board import write_board

        return write_board(store, settings, source, folder)

    def passes(self, question: EvalQuestion) -> list[Pass]:
        raise NotImplementedError

    def templates(self) -> int:
        return 1

    def score(self, correct: Sequence[bool]) -> float:
        return sum(correct) / len(correct)

    def identity(self) -> dict[str, Any]:
        """What changes its passes or scores, for the run's id."""
        return self.settings.model_dump(mode="json")


def protocol(name: str, settings: Mapping[str, Any] | None = None) -> Protocol:
    """The installed protocol `name` under `settings` (validated by its model; None: its defaults). A run
    records them (`Protocol.identity`), so its scores are folded under the settings it ran with."""
    made = plugins.load("protocols", name, where="evaluate.protocol")
    return made(made.settings_model.model_validate(settings or {}), name)


def configured(settings, name: str | None = None) -> Protocol:
    """Protocol `name` (default: `evaluate.protocol`) under its settings in `evaluate.<name>`."""
    options = settings.section("evaluate", EvalSettings)
    name = name or options.protocol
    return protocol(name, options.part(name).model_dump())


def passes(questions: Iterable[EvalQuestion], shown: Protocol) -> list[Pass]:
    return [p for q in questions for p in shown.passes(q)]


def question_score(shown: Protocol, correct: Sequence[bool]) -> float | None:
    """A question's score from its scored passes: None when every pass was skipped."""
    return shown.score(correct) if correct else None


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


def entropy(choices: Sequence[int | None]) -> float:
    """Entropy (nats) of the options chosen across a question's passes; a miss (None) is an outcome too."""
    counts = Counter(choices)
    total = sum(counts.values())
    return -sum(c / total * math.log(c / total) for c in counts.values()) if total else 0.0
