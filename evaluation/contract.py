"""The contract every evaluation protocol meets (`BaseProtocol`) and the installed protocols by name.

Question protocols build on the question machinery's defaults (`evaluation.protocols.Protocol`); the
machinery itself (evaluation/stage.py, board.py) needs only this contract and the registry, so it never
imports the protocols that use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from benchsmith import plugins
from benchsmith.settings import NoSettings
from evaluation.records import EvalQuestion, Pass
from evaluation.settings import EvalSettings
from evaluation.sources import Kind


class BaseProtocol:
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
        raise NotImplementedError

    def board(self, store, settings, source, folder: Path) -> tuple[str, dict[str, Any], int]:
        raise NotImplementedError

    def passes(self, question: EvalQuestion) -> list[Pass]:
        raise NotImplementedError

    def templates(self) -> int:
        return 1

    def score(self, correct: Sequence[bool]) -> float:
        return sum(correct) / len(correct)

    def identity(self) -> dict[str, Any]:
        """What changes its passes or scores, for the run's id."""
        return self.settings.model_dump(mode="json")


def protocol(name: str, settings: Mapping[str, Any] | None = None) -> BaseProtocol:
    """The installed protocol `name` under `settings` (validated by its model; None: its defaults). A run
    records them (`Protocol.identity`), so its scores are folded under the settings it ran with."""
    made = plugins.load("protocols", name, where="evaluate.protocol")
    return made(made.settings_model.model_validate(settings or {}), name)


def configured(settings, name: str | None = None) -> BaseProtocol:
    """Protocol `name` (default: `evaluate.protocol`) under its settings in `evaluate.<name>`."""
    options = settings.section("evaluate", EvalSettings)
    name = name or options.protocol
    return protocol(name, options.part(name).model_dump())

