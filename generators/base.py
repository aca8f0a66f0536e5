"""The base every generate stage builds on (ours and a plugin's): its LLM client and call tally, how it
asks the runner for windows, and how a job's outcome becomes its ledger entry."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from benchsmith import runner
from benchsmith.llm import CallTally, LlmClient, LlmOptions, LlmResult
from benchsmith.settings import NoSettings, Settings

WAITING_FOR_FACTS = "waiting for facts"


def json_object(properties: dict) -> dict:
    """A JSON schema object that requires every one of `properties` and allows nothing else."""
    return {"type": "object", "additionalProperties": False, "required": list(properties), "properties": properties}


def json_format(name: str, properties: dict) -> dict:
    """A strict `response_format` asking the LLM for one `json_object` of `properties`."""
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": json_object(properties)}}


@dataclass
class Outcome:
    """What one job produced: its items (questions, a conversation), or a failed draft (reason, raw), or
    nothing yet (retry later); `skipped` names the source annotations that gave no item, with the
    reason (reform)."""

    items: list = field(default_factory=list)
    failure: str = ""
    raw: str = ""
    finished: bool = True
    skipped: dict[str, str] = field(default_factory=dict)


class GeneratorStage(runner.Stage):
    """A runner stage that writes benchmark content. Besides the runner's contract a subclass sets
    `generator` (its name in `generate.generators`) and `settings_model` (what validates
    `generate.<generator>`), and may override `uses_llm`, `unlisted` and `counts`. The LLM client is
    opened on the first call, once per run."""

    generator: str = ""
    settings_model: type[BaseModel] = NoSettings
    counts: tuple[str, ...] = ("generated", "new_questions", "kept", "superseded")  # its report's counters

    def __init__(self, settings: Settings, llm_options: LlmOptions) -> None:
        self.name = f"generate:{self.generator}"
        self.settings = settings
        self.tally = CallTally()
        self._llm_options = llm_options
        self._client: LlmClient | None = None

    def client(self, context: runner.StageContext) -> LlmClient:
        if self._client is None:
            self._client = LlmClient(self.settings, self._llm_options, context.store)
        return self._client

    @property
    def http_calls(self) -> int:
        return self._client.http_calls if self._client is not None else 0

    @property
    def uses_llm(self) -> bool:
        """Whether its work calls the LLM (the flow then runs it under the Prefect tag `openai`)."""
        return True

    def shard_group(self, subject: str) -> str:
        """The item (a subject starts with its id): the gate's per-item rules see the questions of the
        item's other jobs, so they must come in the order a local run gives them."""
        return subject.split(":", 1)[0]

    def outcome_of(self, result: LlmResult, make: Callable[[], Outcome | None], prefix: str = "") -> Outcome | None:
        """Count the call; the outcome `make` builds from its answer, or a failed draft when the answer is
        not usable (`prefix` says which), or, when no answer came at all, an outcome that waits for a rerun."""
        if not self.tally.count(result):
            return Outcome(failure=result.reason, finished=False)
        if not result.ok:
            return Outcome(failure=prefix + result.reason, raw=result.content)
        try:
            return make()
        except ValueError as exc:  # e.g. a record-level check the schema cannot express
            return Outcome(failure=f"{prefix}unusable: {exc}".splitlines()[0], raw=result.content)

    def unlisted(self) -> Counter:
        """Source records that never became a job, by reason (e.g. an unknown annotation kind)."""
        return Counter()


def ledger_entry(subject: str, outcome: Outcome, report: runner.StageReport,
                 done: dict[str, Any]) -> runner.Outcome:
    """An unfinished job is tried again later (no record); a failed draft is recorded with its raw text,
    a job whose source annotations all gave no item with them (`skipped`); anything else is done, with
    `done` (and what was skipped) as its details."""
    report.counters.update(f"skipped: {reason}" for reason in outcome.skipped.values())
    skipped = {"skipped": outcome.skipped} if outcome.skipped else {}
    if not outcome.finished:
        report.counters["waiting_for_facts"] += outcome.failure == WAITING_FOR_FACTS
        return runner.Outcome(subject, "retry", outcome.failure)
    if outcome.failure:
        return runner.Outcome(subject, "failed", outcome.failure, {"raw": outcome.raw})
    if skipped and not outcome.items:
        return runner.Outcome(subject, "failed", f"no usable annotation: {next(iter(outcome.skipped.values()))}",
                              skipped)
    return runner.Outcome(subject, "done", details=done | skipped)
