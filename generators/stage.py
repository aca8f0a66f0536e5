"""The generate stage: questions for every (item, dimension, generator) not generated yet.

Which pairs are done is kept as verdicts: when a generator has finished an item for a dimension, the
stage writes a Verdict with subject the item, stage "generate" and rule "<generator>:<dimension key>"
(passed, with how many questions came out; or failed, with the reason and the raw LLM text when the
output was malformed). A rerun skips every pair that has such a verdict. A pair whose LLM call failed
at the HTTP level (still 429/5xx/timeout after the retries) gets no verdict, so the next run tries it
again; calls that did succeed are in the LLM cache and are not paid for twice. An image with no facts
yet is left alone too (counted as waiting for facts), so generating before extracting loses nothing.

The work goes in batches; each batch's questions pass the quality gate, have their answer letters
balanced, and are stored (kept ones as candidates, the rest as dropped with their verdicts) before the
next batch starts, so a crash loses at most one batch, and question ids are content-derived, so doing a
batch again adds no duplicates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from benchsmith.dimensions import Dimension, registry
from benchsmith.errors import BenchsmithError
from benchsmith.llm import LlmClient, LlmRequest, LlmResult
from benchsmith.records import Image, Question, Verdict, Video
from benchsmith.settings import Settings
from filters import quality
from filters.quality import QualitySettings
from generators import llm as llm_generator
from generators import programmatic, temporal
from generators.llm import LlmGeneratorSettings
from generators.programmatic import ProgrammaticSettings
from generators.temporal import TemporalSettings

STAGE = "generate"
GeneratorName = Literal["programmatic", "llm", "temporal"]


class GenerateSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    generators: list[GeneratorName] = ["programmatic", "temporal"]
    dimensions: list[str] = Field(default_factory=list)   # dimension keys; empty: every one a generator supports
    seed: int = 0                                         # for templates, distractor picks and letter balance
    batch_size: int = Field(64, ge=1)                     # (item, dimension) pairs stored together
    programmatic: ProgrammaticSettings = ProgrammaticSettings()
    llm: LlmGeneratorSettings = LlmGeneratorSettings()
    temporal: TemporalSettings = TemporalSettings()
    quality: QualitySettings = QualitySettings()

    @field_validator("dimensions")
    @classmethod
    def _known_dimensions(cls, keys: list[str]) -> list[str]:
        try:
            return [registry().get(key).key for key in keys]
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None


class GenerateError(BenchsmithError, ValueError):
    """A generate request that names something unknown."""


def done_rule(generator: str, dimension: Dimension) -> str:
    return f"{generator}:{dimension.key}"


def _supports(generator: str, dimension: Dimension) -> bool:
    if generator == "programmatic":
        return programmatic.supports(dimension)
    if generator == "llm":
        return llm_generator.supports(dimension)
    return temporal.supports(dimension)


@dataclass(frozen=True)
class Job:
    generator: str
    item: Image | Video
    dimension: Dimension


@dataclass
class Outcome:
    """What one job produced: questions, or a failed draft (reason, raw), or nothing yet (retry later)."""

    questions: list[Question] = field(default_factory=list)
    failure: str = ""
    raw: str = ""
    finished: bool = True


def pending_jobs(store, options: GenerateSettings) -> list[Job]:
    """Every (generator, item, dimension) this store has no generate verdict for, in a stable order."""
    wanted = [registry().get(key) for key in options.dimensions] if options.dimensions else list(registry())
    done = {(v.subject_id, v.rule) for v in store.get_verdicts(stage=STAGE, subject_kind="item")}
    jobs = []
    for generator in options.generators:
        dims = [d for d in wanted if _supports(generator, d)]
        if not dims:
            continue
        kind = "video" if generator == "temporal" else "image"
        for item in store.get_items(kind=kind):
            jobs.extend(Job(generator, item, d) for d in dims if (item.id, done_rule(generator, d)) not in done)
    return jobs


@dataclass
class Report:
    jobs: int = 0
    finished: int = 0
    retry_later: int = 0
    waiting_for_facts: int = 0
    failed_drafts: int = 0
    generated: int = 0
    stored: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    http_failures: Counter = field(default_factory=Counter)   # reason -> jobs left for the next run
    llm_requests: int = 0
    llm_cached: int = 0
    http_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0

    def as_dict(self) -> dict:
        return {"jobs": self.jobs, "finished": self.finished, "retry_later": self.retry_later,
                "waiting_for_facts": self.waiting_for_facts,
                "failed_drafts": self.failed_drafts, "generated": self.generated, "new_questions": self.stored,
                "kept": self.kept, "dropped": dict(self.dropped), "http_failures": dict(self.http_failures),
                "llm_requests": self.llm_requests,
                "llm_cached": self.llm_cached, "http_calls": self.http_calls, "tokens_in": self.tokens_in,
                "tokens_out": self.tokens_out, "cost_usd": round(self.cost_usd, 6)}


class Generation:
    """Runs jobs batch by batch against one store."""

    def __init__(self, store, settings: Settings, options: GenerateSettings) -> None:
        self.store = store
        self.settings = settings
        self.options = options
        self.report = Report()
        self._vocabulary: programmatic.Vocabulary | None = None
        self._client: LlmClient | None = None
        self._labels: list[str] | None = None

    def vocabulary(self) -> programmatic.Vocabulary:
        """The vocabulary file widened with every label, attribute and OCR word in the store (once a run)."""
        if self._vocabulary is None:
            ids = [item.id for item in self.store.get_items(kind="image")]
            facts = [f for fs in self.store.get_facts(ids, kinds=["object", "ocr"]).values() for f in fs]
            self._vocabulary = programmatic.load_vocabulary(self.options.programmatic.vocabulary).widened(facts)
        return self._vocabulary

    def labels(self) -> list[str]:
        """Every action label and step in the store's videos: the pool of temporal distractors."""
        if self._labels is None:
            self._labels = temporal.label_set(self.store.get_items(kind="video"), self.options.temporal)
        return self._labels

    def client(self) -> LlmClient:
        if self._client is None:
            self._client = LlmClient(self.settings, self.options.llm.options, self.store)
        return self._client

    def run(self, jobs: Sequence[Job], advance: Callable[[int], None] | None = None) -> Report:
        self.report.jobs += len(jobs)
        size = self.options.llm.batch_size if any(j.generator == "llm" for j in jobs) else self.options.batch_size
        for start in range(0, len(jobs), size):
            batch = list(jobs[start:start + size])
            self._store(batch, self._outcomes(batch))
            if advance:
                advance(len(batch))
        if self._client is not None:
            self.report.http_calls = self._client.http_calls
        return self.report

    def _outcomes(self, batch: list[Job]) -> list[Outcome]:
        """Each job's outcome; all the batch's LLM calls (questions and video distractors) go out together."""
        image_ids = [j.item.id for j in batch if j.generator != "temporal"]
        facts = self.store.get_facts(sorted(set(image_ids))) if image_ids else {}
        outcomes: list[Outcome] = [Outcome() for _ in batch]
        calls: list[tuple[LlmRequest, Callable[[LlmResult], None]]] = []
        for index, job in enumerate(batch):
            if job.generator != "temporal" and not facts[job.item.id]:
                # nothing extracted yet: leave the job for a run after `benchsmith extract`
                outcomes[index].finished = False
                self.report.waiting_for_facts += 1
            elif job.generator == "programmatic":
                outcomes[index].questions = programmatic.generate(
                    job.item, facts[job.item.id], job.dimension, self.vocabulary(), self.options.programmatic,
                    seed=self.options.seed)
            elif job.generator == "temporal":
                outcomes[index].questions = temporal.generate(job.item, job.dimension, self.labels(),
                                                              self.options.temporal, seed=self.options.seed)
                if self.options.temporal.distractors == "llm":
                    calls.extend(self._distractor_calls(job, outcomes[index]))
            else:
                request = llm_generator.request_for(job.item, facts[job.item.id], job.dimension, self.options.llm)
                calls.append((request, partial(self._questions_done, outcomes, index, job, request)))
        if calls:
            for (_request, done), result in zip(calls, self.client().run([r for r, _ in calls])):
                done(result)
        return outcomes

    def _distractor_calls(self, job: Job, outcome: Outcome):
        llm = self.options.llm
        for position, question in enumerate(outcome.questions):
            if temporal.wants_llm_distractors(question):
                request = temporal.distractor_request(
                    question, job.item, job.dimension, model=llm.model_for(job.dimension),
                    temperature=llm.temperature, seed=llm.seed, max_tokens=llm.max_tokens)
                yield request, partial(self._distractors_done, outcome, position, request)

    def _account(self, result: LlmResult) -> bool:
        """Count the call; False when it got no answer at all (HTTP failure: the job waits for a rerun)."""
        self.report.llm_requests += 1
        self.report.llm_cached += result.cached
        self.report.tokens_in += result.tokens_in
        self.report.tokens_out += result.tokens_out
        self.report.cost_usd += result.cost_usd
        if not result.ok and not result.content:
            self.report.http_failures[result.reason] += 1
            return False
        return True

    def _distractors_done(self, outcome: Outcome, position: int, request: LlmRequest, result: LlmResult) -> None:
        if not self._account(result):
            outcome.finished, outcome.failure = False, result.reason
            return
        outcome.questions[position] = temporal.with_llm_distractors(outcome.questions[position], request, result)

    def _questions_done(self, outcomes: list[Outcome], index: int, job: Job, request: LlmRequest,
                        result: LlmResult) -> None:
        if not self._account(result):
            outcomes[index] = Outcome(failure=result.reason, finished=False)
        elif not result.ok:
            outcomes[index] = Outcome(failure=result.reason, raw=result.content)
        else:
            try:
                outcomes[index] = Outcome(llm_generator.questions_from(result, request, job.item, job.dimension))
            except ValueError as exc:  # e.g. a record-level check the schema cannot express
                outcomes[index] = Outcome(failure=f"unusable question: {exc}".splitlines()[0], raw=result.content)

    def _store(self, batch: list[Job], outcomes: list[Outcome]) -> None:
        generated = [q for o in outcomes if o.finished for q in o.questions]
        self.report.generated += len(generated)
        stored = {item_id: self.store.get_questions(item_id=item_id)
                  for item_id in sorted({q.item_id for q in generated})}
        known = {q.id for qs in stored.values() for q in qs}
        generated = [q for q in generated if q.id not in known]  # already stored by an interrupted run
        existing = {item_id: [q for q in qs if q.status != "dropped"] for item_id, qs in stored.items()}
        kept, dropped = quality.gate(generated, existing, self.options.quality)
        kept = quality.balance_answers(kept, seed=self.options.seed)
        self.report.kept += len(kept)
        self.report.dropped.update(v.rule for _q, v in dropped)
        self.report.stored += self.store.add_questions(
            kept + [q for q, _v in dropped], stage=STAGE, verdicts_for_new=[v for _q, v in dropped])
        marks = []
        for job, outcome in zip(batch, outcomes):
            if not outcome.finished:
                self.report.retry_later += bool(outcome.failure)
                continue
            self.report.finished += 1
            self.report.failed_drafts += bool(outcome.failure)
            marks.append(Verdict(
                subject_id=job.item.id, subject_kind="item", stage=STAGE, rule=done_rule(job.generator, job.dimension),
                passed=not outcome.failure, reason=outcome.failure,
                details={"questions": len(outcome.questions)} | ({"raw": outcome.raw} if outcome.failure else {})))
        self.store.add_verdicts(marks)


def plan(store, settings: Settings, *, generators: Sequence[str] = (), dimensions: Sequence[str] = (),
         limit: int | None = None) -> tuple[GenerateSettings, list[Job]]:
    """The stage's settings and its missing jobs. `generators` / `dimensions` (keys or ids) narrow the
    settings' lists; `limit` caps how many jobs are done this time."""
    options = settings.section(STAGE, GenerateSettings)
    unknown = sorted(set(generators) - set(get_args(GeneratorName)))
    if unknown:
        raise GenerateError(f"unknown generator {', '.join(unknown)}; choose from {', '.join(get_args(GeneratorName))}")
    try:
        keys = [registry().get(d).key for d in dimensions]
    except KeyError as exc:
        raise GenerateError(str(exc.args[0])) from None
    options = options.model_copy(update={"generators": list(generators) or options.generators,
                                         "dimensions": keys or options.dimensions})
    return options, pending_jobs(store, options)[:limit]


def run_generate(store, settings: Settings, **narrowing) -> dict:
    """Generate everything missing; return the run's counters, tokens and cost."""
    options, jobs = plan(store, settings, **narrowing)
    return Generation(store, settings, options).run(jobs).as_dict()
