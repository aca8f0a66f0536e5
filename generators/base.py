"""The base every generate stage builds on (ours and a plugin's): its LLM client and call tally, how it
asks the runner for windows, and how a job's outcome becomes its ledger entry."""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from pydantic import BaseModel

from benchsmith import runner
from benchsmith.llm import CallTally, LlmClient, LlmOptions
from benchsmith.settings import NoSettings, Settings

WAITING_FOR_FACTS = "waiting for facts"


class JobOutcome(Protocol):
    failure: str
    raw: str
    finished: bool


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

    def unlisted(self) -> Counter:
        """Source records that never became a job, by reason (e.g. an unknown annotation kind)."""
        return Counter()


def ledger_entry(subject: str, outcome: JobOutcome, report: runner.StageReport,
                 done: dict[str, Any]) -> runner.Outcome:
    """An unfinished job is tried again later (no record); a failed draft is recorded with its raw text;
    anything else is done, with `done` as its details."""
    if not outcome.finished:
        report.counters["waiting_for_facts"] += outcome.failure == WAITING_FOR_FACTS
        return runner.Outcome(subject, "retry", outcome.failure)
    if outcome.failure:
        return runner.Outcome(subject, "failed", outcome.failure, {"raw": outcome.raw})
    return runner.Outcome(subject, "done", details=done)
