"""The generate stage: questions for every (item, dimension) a generator has not done under its settings.

Each question generator is one runner stage (`benchsmith.runner`), `generate:<generator>`:
`ProgrammaticStage`, `LlmStage`, `TemporalStage` and `ReformStage` share `QuestionStage`'s gating and
storing (conversations: `generators.conversation`); the LLM's, when it asks about image sets, follows
`generate:sets` (`generators.set_grouping`), which groups the stored images into them. A job is one item
and one dimension; its ledger subject carries a hash of what shapes that dimension's questions (the prompt
template and the model; the template version and vocabulary), and the stage's config key the
generator-wide settings. So editing one prompt template makes exactly that dimension's jobs pending again;
switching the model or the seed, all of them. The questions a redone job replaces are kept as
`superseded`; questions in review stay.

A job whose LLM call failed at the HTTP level gets no ledger row, so the next run tries it again (the
calls that succeeded are in the LLM cache); an image with no facts yet waits for them; a job whose output
was malformed is recorded as failed, with the reason and the raw LLM text.

LLM calls stay in flight across commits: `process` gets a window of jobs (never splitting an image's)
and yields an image's jobs together, in job order, once all their answers are in, so the gate's per-item
rules meet its questions in one order whatever order the answers came in. Each group of results passes
the quality gate, has its answer letters balanced, and is stored (kept ones as candidates, the rest as
dropped with their verdicts); ids are content-derived, so storing a group again adds nothing.
"""

from __future__ import annotations

import gc
import os
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field

from benchsmith.dimensions import Dimension, registry
from benchsmith import plugins, runner
from benchsmith.errors import BenchsmithError
from benchsmith.llm import LlmRequest, LlmResult, stream
from benchsmith.records import Image, Question, Video, stable_hash
from benchsmith.settings import Settings, WithParts, keyed
from generators import quality
from generators.quality import QualitySettings
from generators import llm as llm_generator
from generators import fact_check, programmatic, reform, temporal
from generators.base import WAITING_FOR_FACTS, GeneratorStage, Outcome, ledger_entry
from generators.set_grouping import SetGroupingStage

STAGE = "generate"
# a question in any of these has been, or may be, seen: its options count as used (`caption_uses`)
SHOWN = ("candidate", "in_review", "accepted", "rejected", "published", "withdrawn")


class GenerateError(BenchsmithError, ValueError):
    """A generate request that names something unknown."""


def installed(generators: list[str]) -> list[str]:
    """`generators` (names in the plugin group generators), when every one is installed."""
    if unknown := [name for name in generators if name not in plugins.names("generators")]:
        raise GenerateError(f"{', '.join(unknown)}: not an installed generator "
                            f"(installed: {', '.join(plugins.names('generators'))})")
    return generators


def dimension_keys(dimensions: list[str]) -> list[str]:
    """The keys of `dimensions` (keys or ids)."""
    try:
        return [registry().get(d).key for d in dimensions]
    except KeyError as exc:
        raise GenerateError(exc.args[0]) from None


class GenerateSettings(WithParts):
    """The `generate` section: the keys below, shared by every generator, and one key per generator
    (`generate.<name>`), validated by the settings model its stage declares (`settings_model`)."""

    parts: ClassVar[str] = "generators"

    generators: Annotated[list[str], AfterValidator(installed)] = ["programmatic", "temporal"]
    # dimension keys; empty: every one a generator supports
    dimensions: Annotated[list[str], AfterValidator(dimension_keys)] = Field(default_factory=list)
    seed: int = 0                                         # for templates, distractor picks and letter balance
    batch_size: int = Field(64, ge=1)                     # (item, dimension) jobs handed over and stored together
    quality: QualitySettings = QualitySettings()


@dataclass(frozen=True, slots=True)
class ItemRef:
    """An item known by its id alone, for a stage that keeps what it needs of the item elsewhere
    (reform: a lean copy of each of 100,000 images held ~1.3 KB more than its id)."""

    id: str


@dataclass(frozen=True)
class Job:
    generator: str
    item: Image | Video | ItemRef
    dimension: Dimension


class QuestionStage(GeneratorStage):
    """A question generator over every (item, dimension) job it supports. A subclass says which
    dimensions it supports, what shapes one dimension's questions, and how a window of jobs is done;
    gating, balancing, superseding and storing are shared."""

    templates: Collection[str] | None = None  # the dimension keys it has templates for; None: it overrides `supports`
    version = ""  # with a dimension's definition, what shapes its questions (else it overrides `dimension_key`)

    def __init__(self, settings: Settings, options: GenerateSettings) -> None:
        self.own = options.part(self.generator)  # generate.<generator>, by its settings model
        self.llm = options.part("llm")            # generate.llm: the model that writes LLM distractors too
        super().__init__(settings, self.llm.options)
        self.options = options
        wanted = [registry().get(key) for key in options.dimensions] if options.dimensions else list(registry())
        self.dimensions = [d for d in wanted if self.supports(d)]
        self._dimension_keys = {d.key: self.dimension_key(d) for d in self.dimensions}

    @classmethod
    def stages(cls, settings: Settings, options: GenerateSettings) -> list[QuestionStage]:
        """Its stage over the dimensions it supports; none when it supports none of those asked for."""
        stage = cls(settings, options)
        return [stage] if stage.dimensions else []

    # -- what a generator says about itself -------------------------------------------------------------

    def supports(self, dimension: Dimension) -> bool:
        if self.templates is None:  # a plugin that says neither would silently make no stage
            raise NotImplementedError(f"{type(self).__name__} names no `templates` and does not override `supports`")
        return dimension.key in self.templates

    def dimension_key(self, dimension: Dimension) -> str:
        """What shapes one dimension's questions beyond the stage's settings."""
        return stable_hash(self.version, dimension.definition, length=12)

    def distractor_prompt(self) -> Path | None:
        """The prompt file of its LLM distractors, when it asks the LLM for them."""
        return None

    @property
    def uses_llm(self) -> bool:
        return self.distractor_prompt() is not None

    def windows(self) -> tuple[int, int | None]:
        return self.options.batch_size, None

    # -- what is done, and under which settings ---------------------------------------------------------

    def config_key(self) -> str:
        parts = keyed(self.own)  # per-dimension parts (models, prompt files, vocabulary) are in each job's subject
        if (prompt := self.distractor_prompt()) is not None:
            parts["distractor_llm"] = self.llm.model_dump(mode="json", include={"model", "temperature", "seed",
                                                                             "max_tokens"})
            parts["distractor_prompt"] = prompt.read_text(encoding="utf-8")
        return runner.config_key(self.generator, self.options.seed, self.options.quality.model_dump(mode="json"), parts)

    def units(self, context: runner.StageContext) -> list[Job]:
        """Every (item, dimension) whose item is of the dimension's modality."""
        return [Job(self.generator, item, d) for kind in dict.fromkeys(d.modality for d in self.dimensions)
                for item in context.store.get_items(kind=kind) for d in self.dimensions if d.modality == kind]

    def subject(self, job: Job) -> str:
        return f"{job.item.id}:{job.dimension.key}:{self._dimension_keys[job.dimension.key]}"

    def _with_facts(self, jobs: Sequence[Job], context: runner.StageContext) -> Iterator[tuple[Job, list]]:
        """Each job with its image's facts, read for the whole window at once."""
        facts = context.store.get_facts(sorted({j.item.id for j in jobs}))
        for job in jobs:
            yield job, facts[job.item.id]

    def _llm_distractors_missing(self, answers: Sequence[LlmResult]) -> Outcome | None:
        """Count the calls; the outcome of a job some of whose calls got no answer at all (it waits for
        a rerun), else None."""
        missing = [answer.reason for answer in answers if not self.tally.count(answer)]
        return Outcome(failure=missing[0], finished=False) if missing else None

    # -- storing ----------------------------------------------------------------------------------------

    def commit(self, context: runner.StageContext, pairs: list[tuple[Job, Outcome]],
               report: runner.StageReport) -> list[runner.Outcome]:
        store = context.store
        finished = [(job, o) for job, o in pairs if o.finished]
        generated = []
        for job, o in finished:
            config = self._dimension_keys[job.dimension.key]
            for q in o.items:  # made for this commit alone: marked in place, a copy each cost more
                q.meta = q.meta | {"config": config}
                generated.append(q)
        report.counters["generated"] += len(generated)
        stored: dict[str, list[Question]] = {item_id: [] for item_id in sorted({job.item.id for job, _o in finished})}
        for question in store.get_questions(item_ids=list(stored)):
            stored[question.item_id].append(question)
        known = {q.id for qs in stored.values() for q in qs}
        fresh = [q for q in generated if q.id not in known]  # already stored by an interrupted run
        # candidates of the finished jobs' (item, dimension, generator) made under other settings
        jobs, new_ids = {(job.item.id, job.dimension.id): job for job, _o in finished}, {q.id for q in generated}
        replaced = [q.id for qs in stored.values() for q in qs
                    if (job := jobs.get((q.item_id, q.dimension_id))) is not None and q.status == "candidate"
                    and q.meta.get("generator") == job.generator and q.id not in new_ids
                    and q.meta.get("config") != self._dimension_keys[job.dimension.key]]
        if replaced:
            report.counters["superseded"] += store.move("question",
                replaced, "superseded", stage=STAGE, reason="generated again after its settings changed")
        gone = set(replaced)
        existing = {item_id: [q for q in qs if q.status not in ("dropped", "superseded") and q.id not in gone]
                    for item_id, qs in stored.items()}
        kept, dropped = quality.gate(fresh, existing, self.options.quality)
        kept = quality.balance_answers(kept, seed=self.options.seed)
        report.counters["kept"] += len(kept)
        report.counters.update(f"dropped: {v.rule}" for _q, v in dropped)
        report.counters["new_questions"] += store.add_questions(
            kept + [q for q, _v in dropped], stage=STAGE, verdicts_for_new=[v for _q, v in dropped])
        return [ledger_entry(self.subject(job), outcome, report, {"questions": len(outcome.items)})
                for job, outcome in pairs]


class ProgrammaticStage(QuestionStage):
    """Template questions computed from the extracted facts: no LLM, exact answers."""

    generator = "programmatic"
    settings_model = programmatic.ProgrammaticSettings
    templates = programmatic.TEMPLATES

    def dimension_key(self, dimension: Dimension) -> str:
        vocabulary = self.own.vocabulary or programmatic.VOCABULARY_FILE
        return stable_hash(programmatic.VERSION, vocabulary.read_text(encoding="utf-8"), dimension.definition,
                           length=12)

    def prepare(self, context: runner.StageContext, jobs: Sequence[Job]) -> None:
        """The vocabulary file widened with every label, attribute and OCR word in the store (captions too:
        what they name is never counted as absent, and the key tallies must know it)."""
        images = context.store.get_items(kind="image")
        facts = [f for fs in context.store.get_facts([i.id for i in images], kinds=["object", "ocr", "caption"]).values()
                 for f in fs]
        sizes = {image.id: (image.width, image.height) for image in images}
        self.vocabulary = programmatic.load_vocabulary(self.own.vocabulary).widened(facts, self.own, sizes)

    def process(self, jobs: Sequence[Job], context: runner.StageContext) -> Iterator[tuple[Job, Outcome]]:
        for job, facts in self._with_facts(jobs, context):
            if not facts:
                yield job, Outcome(failure=WAITING_FOR_FACTS, finished=False)
                continue
            yield job, Outcome(programmatic.generate(job.item, facts, job.dimension, self.vocabulary,
                                                     self.own, seed=self.options.seed))


class LlmStage(QuestionStage):
    """Questions the LLM writes from an image's facts (a set's: each image's), one prompt template per dimension."""

    generator = "llm"
    settings_model = llm_generator.LlmGeneratorSettings

    @classmethod
    def stages(cls, settings: Settings, options: GenerateSettings) -> list[GeneratorStage]:
        """Its stage, after the one grouping stored images into sets (`sets`) when it asks about sets."""
        stages = super().stages(settings, options)
        if stages and stages[0].llm.sets and any(d.modality == "image_set" for d in stages[0].dimensions):
            return [SetGroupingStage(settings, options), *stages]
        return stages

    @property
    def uses_llm(self) -> bool:
        return True

    def supports(self, dimension: Dimension) -> bool:
        return llm_generator.supports(dimension, self.llm.prompts_dir)

    def dimension_key(self, dimension: Dimension) -> str:
        folder = llm_generator.prompts_for(dimension, self.llm.prompts_dir)
        shared, own = ((folder / f"{name}.yaml").read_text(encoding="utf-8") for name in ("_shared", dimension.key))
        return stable_hash(shared, own, self.llm.model_for(dimension), length=12)

    def units(self, context: runner.StageContext) -> list[Job]:
        """Every (item, dimension) but text-rich dimensions on images with too few lines of text read
        (`min_text_lines`); OCR extracted later brings their jobs in."""
        jobs = super().units(context)
        if text_rich := sorted({job.item.id for job in jobs if llm_generator.text_rich(job.dimension)}):
            ocr = context.store.get_facts(text_rich, kinds=["ocr"])
            jobs = [job for job in jobs
                    if llm_generator.asked_about(job.dimension, ocr.get(job.item.id, []), self.llm)]
        return jobs

    def windows(self) -> tuple[int, int | None]:
        # a wide window keeps calls in flight while small groups of answers are stored
        return max(self.llm.batch_size, 1024), 16

    def process(self, jobs: Sequence[Job], context: runner.StageContext) -> Iterator[tuple[Job, Outcome]]:
        calls: list[tuple[Job, LlmRequest]] = []
        blocks: dict[tuple[str, bool], str] = {}  # (item id, text-rich) -> its facts block, written once
        prompted: dict[int, list] = {}  # call index -> the candidate answers its prompt holds
        members = {i for job in jobs if job.item.kind == "image_set" for i in job.item.images}
        images = {image.id: image for image in context.store.get_items(sorted(members))} if members else {}
        facts = context.store.get_facts(sorted({job.item.id for job in jobs} | members))
        for job in jobs:
            pictures = [images[i] for i in job.item.images] if job.item.kind == "image_set" else [job.item]
            if not all(facts[picture.id] for picture in pictures):
                yield job, Outcome(failure=WAITING_FOR_FACTS, finished=False)
                continue
            if (block := (job.item.id, llm_generator.text_rich(job.dimension))) not in blocks:
                blocks[block] = llm_generator.pictures_block(pictures, facts, job.dimension, self.llm.context_chars)
            found = llm_generator.answer_candidates(job.item, facts.get(job.item.id, []), job.dimension, self.llm)
            if found is not None:
                prompted[len(calls)] = found
            said = "" if found is None else llm_generator.candidates_block(found, job.dimension, self.llm)
            calls.append((job, llm_generator.request_for(job.item, blocks[block], job.dimension, self.llm, said)))
        # an image's jobs are handed on together, in job order, once all are answered (`_together`)
        left = Counter(job.item.id for job, _request in calls)
        answered: dict[str, list[tuple[int, Job, Outcome]]] = {}
        for index, result in stream(self.client(context), [request for _job, request in calls]):
            job, request = calls[index]
            outcome = self.outcome_of(result, lambda: Outcome(self._fact_checked(job, facts, llm_generator.questions_from(
                result, request, job.item, job.dimension, self.llm.prompts_dir,
                candidates=prompted.get(index), rekey=self.llm.candidates.rekey))))
            answered.setdefault(job.item.id, []).append((index, job, outcome))
            left[job.item.id] -= 1
            if not left[job.item.id]:
                yield from _together(sorted(answered.pop(job.item.id), key=lambda answer: answer[0]))


    def _fact_checked(self, job: Job, facts: dict[str, list], questions: list[Question]) -> list[Question]:
        """A one-image item's questions checked against the facts they were written from (`fact_check`),
        an image set's as unchecked; what the policy `fact_check.keep` leaves out is dropped with the reason."""
        if job.item.kind == "image_set":
            return fact_check.kept([q.model_copy(update={"meta": q.meta | {fact_check.RULE: "unchecked: an image set"}})
                                    for q in questions], self.llm.fact_check.keep)
        return fact_check.checked(questions, job.dimension.key, facts[job.item.id], self.llm.fact_check.keep)


class TemporalStage(QuestionStage):
    """Questions on a video's action labels and steps, with distractors from other videos' labels or
    from the LLM."""

    generator = "temporal"
    settings_model = temporal.TemporalSettings
    templates, version = temporal.TEMPLATES, temporal.__name__

    def distractor_prompt(self) -> Path | None:
        return temporal.PROMPT_FILE if self.own.distractors == "llm" else None

    def prepare(self, context: runner.StageContext, jobs: Sequence[Job]) -> None:
        """Every action label and step in the store's videos: the pool of temporal distractors."""
        self.labels = temporal.label_set(context.store.get_items(kind="video"), self.own)

    def process(self, jobs: Sequence[Job], context: runner.StageContext) -> Iterator[tuple[Job, Outcome]]:
        for job in jobs:
            yield job, self._questions(job, context)

    def _questions(self, job: Job, context: runner.StageContext) -> Outcome:
        outcome = Outcome(temporal.generate(job.item, job.dimension, self.labels, self.own,
                                            seed=self.options.seed))
        if not self.uses_llm:
            return outcome
        wanted = [(position, temporal.distractor_request(question, job.item, job.dimension, self.llm))
                  for position, question in enumerate(outcome.items) if temporal.wants_llm_distractors(question)]
        results = self.client(context).run([request for _position, request in wanted])
        if (waiting := self._llm_distractors_missing(results)) is not None:
            return waiting
        for (position, request), result in zip(wanted, results):
            outcome.items[position] = temporal.with_llm_distractors(outcome.items[position], request, result)
        return outcome


class ReformStage(QuestionStage):
    """Questions reformulated from the annotations an ingested dataset carries (VQA answers, class
    labels, captions, referring expressions, OCR ground truth), with distractors from their pools."""

    generator = "reform"
    settings_model = reform.ReformSettings

    def __init__(self, settings: Settings, options: GenerateSettings) -> None:
        super().__init__(settings, options)
        self._jobs: list[Job] | None = None
        self._unknown: Counter = Counter()
        self._pools: reform.Pools | None = None
        self._frozen = False

    def supports(self, dimension: Dimension) -> bool:
        return reform.supports(dimension, self.own.tasks)

    def dimension_key(self, dimension: Dimension) -> str:
        tasks = {k: v for k, v in reform.load_tasks(self.own.tasks).items() if v.dimension == dimension.key}
        return stable_hash(reform.VERSION, {k: v.model_dump(mode="json") for k, v in tasks.items()},
                           dimension.definition, reform.aliases_text(), length=12)

    def distractor_prompt(self) -> Path | None:
        return reform.PROMPT_FILE if self.own.llm_distractors else None

    def windows(self) -> tuple[int, int | None]:
        # wide windows for MiniLM and the nearest-word search; large commits, as a lost group costs no
        # call to redo (LLM distractors are answered from the call cache)
        return max(self.options.batch_size, 2048), max(self.options.batch_size, 1024)

    def units(self, context: runner.StageContext) -> list[Job]:
        """Only the items and dimensions their annotations' task kinds feed, listed once a run. A job holds
        its item's id: the pools' pass keeps the annotations parsed (`Pools.readings`), far smaller than
        the items. With nothing done yet under these settings, the pools are read in the same pass."""
        store = context.store
        if self._jobs is None:
            kinds = reform.load_tasks(self.own.tasks)
            self._jobs = []
            with _rare_collections():
                items = self._listed(store.iter_items(kind="image"), kinds)
                key = self.config_key()
                if self._pools is None and not any(k == key for k, _status in store.ledger_counts(self.name)):
                    self._pools = reform.Pools(items, self.own, seed=self.options.seed)
                else:  # a rerun may have nothing left to do: no pools until a window needs them
                    deque(items, maxlen=0)
        return self._jobs

    def _listed(self, items: Iterable[Image], kinds: dict[str, reform.TaskKind]) -> Iterator[Image]:
        """`items`, passed on as each one's jobs are listed."""
        for item in items:
            tasks = {r.get("task") for r in reform.records_of(item)}
            self._unknown.update(f"unknown task kind {t!r}; known: {', '.join(sorted(kinds))}"
                                 for r in reform.records_of(item) if (t := r.get("task")) not in kinds)
            ref = ItemRef(item.id)
            self._jobs += [Job(self.generator, ref, d) for d in self.dimensions
                           if any(kinds[t].dimension == d.key for t in tasks if t in kinds)]
            yield item

    def workers(self) -> int:
        if self.uses_llm:  # the LLM client and its counts live in this process
            return 1
        if self.own.workers:
            return self.own.workers
        # the cores this process may use (Linux), else the machine's
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

    def prepare(self, context: runner.StageContext, jobs: Sequence[Job]) -> None:
        """The pools, with the readings of every item of `jobs` (items the pools' pass did not meet are
        read from the store now). Workers forked later share them and every MiniLM vector the jobs need,
        so the model's process ends here once the vectors are back (one process keeps it: LLM distractors
        are compared with it)."""
        pools = self.pools(context)
        if missing := sorted({job.item.id for job in jobs} - pools.readings.keys()):
            pools.read_also(context.store.get_items(missing))
        if self.workers() > 1:
            pools.embeddings.release()

    def unlisted(self) -> Counter:
        """Reform annotations whose task kind the registry lacks (they feed no dimension), by reason."""
        return self._unknown

    def pools(self, context: runner.StageContext) -> reform.Pools:
        """Every reform annotation's answers, classes, captions and texts: the distractor pools (once a run)."""
        if self._pools is None:
            self._pools = reform.Pools(context.store.iter_items(kind="image"), self.own, seed=self.options.seed,
                                       asked=self._caption_questions(context.store))
        return self._pools

    def _caption_questions(self, store) -> dict[tuple[str, str], list[str]]:
        """The caption questions already made under these settings, (item id, annotation id) -> options: a
        collection grown since plans its new ones around the captions these use (`caption_uses`)."""
        return {(q.item_id, q.meta["annotation_id"]): q.options
                for d in self.dimensions for q in store.get_questions(status=SHOWN, dimension_id=d.id)
                if q.meta.get("generator") == self.generator and q.provenance.params.get("method") == "captions"
                and q.meta.get("config") == self._dimension_keys[d.key]}

    def process(self, jobs: Sequence[Job], context: runner.StageContext) -> Iterator[tuple[Job, Outcome]]:
        with _rare_collections():  # the runner's commits run between the yields, under it too
            pools, seed = self.pools(context), self.options.seed
            parsed = [pools.readings[job.item.id].of(job.dimension) for job in jobs]
            pools.prepare([p for found, _skipped in parsed for p in found])  # MiniLM vectors for the window at once
            if not self._frozen:
                # the pools, the readings and the jobs live as long as the run: out of the collector's full passes,
                # which otherwise walk them all again every few thousand questions (a tenth of a run's time).
                # (gc.get_freeze_count() would walk every frozen object, ~50 ms a window)
                gc.freeze()
                self._frozen = True
            for job, (found, skipped) in zip(jobs, parsed):
                result = reform.generate(job.item.id, job.dimension, found, skipped, pools, seed=seed)
                yield job, self._with_llm_distractors(job, result, pools, context)

    def _with_llm_distractors(self, job: Job, result: reform.questions.Result, pools: reform.Pools,
                              context: runner.StageContext) -> Outcome:
        """The job's questions, with those short of distractors completed by the LLM (`result.short`)."""
        item_id = job.item.id
        requests = [reform.distractor_request(short, item_id, job.dimension, self.llm) for short in result.short]
        answers = self.client(context).run(requests) if requests else []
        if (waiting := self._llm_distractors_missing(answers)) is not None:
            return waiting
        for short, request, answer in zip(result.short, requests, answers):
            made = reform.with_llm_distractors(short, item_id, job.dimension, request, answer, pools,
                                               self.options.seed)
            if isinstance(made, str):
                result.skipped[short.parsed.annotation] = made
            else:
                result.questions.append(made)
        return Outcome(result.questions, skipped=result.skipped)


def _together(answers: list[tuple[int, Job, Outcome]]) -> Iterator[tuple[Job, Outcome]]:
    """An image's answered jobs; when one of them waits for a retry, all of them wait (their answers are in
    the call cache), so the image's questions are stored together and gated in one order."""
    waiting = next((o.failure for _i, _job, o in answers if not o.finished), None)
    for _index, job, outcome in answers:
        if waiting is not None and outcome.finished:
            outcome = Outcome(failure=f"waits with its image's other jobs: {waiting}", finished=False)
        yield job, outcome


@contextmanager
def _rare_collections(young: int = 100_000) -> Iterator[None]:
    """The collector's young generation widened while a stage makes and stores many small objects that
    mostly live on (annotations, pools, questions): with the default 700 it ran every few hundred
    questions, and the older generations' passes that follow walked every pool and cache again (100k
    annotations: ~18 s of ~100)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(young, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def build_stages(settings: Settings, *, generators: Sequence[str] = (),
                 dimensions: Sequence[str] = ()) -> list[GeneratorStage]:
    """A stage per generator in the settings (or `generators`), over the settings' dimensions (or
    `dimensions`, keys or ids). Each generator is a class in the plugin group `generators` whose
    `stages(settings, options)` gives its stages (none when it has nothing to do for those dimensions)."""
    options = settings.section(STAGE, GenerateSettings)
    options = options.model_copy(update={"dimensions": dimension_keys(list(dimensions)) or options.dimensions})
    return [stage for name in installed(list(generators)) or options.generators
            for stage in plugins.load("generators", name).stages(settings, options)]


def run_stages(store, stages: Sequence[GeneratorStage], *, limit: int | None = None,
               subjects: Collection[str] | None = None, progress: Callable[[int], None] | None = None,
               workers: int | None = None) -> dict:
    """Run each generator's stage; return the run's counters, tokens and cost, summed. `workers`: the
    processes each stage may fork (None: what the stage asks for; a flow's shards pass 1)."""
    total: Counter = Counter()
    for stage in stages:
        left = None if limit is None else max(0, limit - total["jobs"])
        report = runner.run(stage, store, limit=left, subjects=subjects, progress=progress, workers=workers)
        total["seconds"] += report.seconds
        total.update({"jobs": report.pending, "finished": report.done + report.failed,
                      "failed_drafts": report.failed, "retry_later": report.retry_later, **report.counters})
        total.update(stage.tally.stats)
        total.update({f"skipped: {reason}": n for reason, n in stage.unlisted().items()})
        total["http_calls"] += stage.http_calls
    counts = dict.fromkeys(c for stage in stages for c in stage.counts) or GeneratorStage.counts
    out = {k: total[k] for k in ("jobs", "finished", "retry_later", "waiting_for_facts", "failed_drafts", *counts)}
    out["retry_later"] -= out["waiting_for_facts"]
    # questions dropped by the gate, and source annotations (reform) that gave none, by reason
    for what in ("dropped", "skipped"):
        out[what] = {k.removeprefix(f"{what}: "): v for k, v in total.items() if k.startswith(f"{what}: ")}
    out["http_failures"] = dict(sum((stage.tally.http_failures for stage in stages), Counter()))
    out |= {k: total.get(k, 0) for k in ("llm_requests", "llm_cached", "http_calls", "tokens_in", "tokens_out")}
    out["cost_usd"] = round(total.get("cost_usd", 0.0), 6)
    out["seconds"] = round(total.get("seconds", 0.0), 2)
    return out


def run_generate(store, settings: Settings, *, generators: Sequence[str] = (), dimensions: Sequence[str] = (),
                 limit: int | None = None, progress: Callable[[int], None] | None = None) -> dict:
    """Generate everything missing; return the run's counters, tokens and cost."""
    return run_stages(store, build_stages(settings, generators=generators, dimensions=dimensions),
                      limit=limit, progress=progress)
