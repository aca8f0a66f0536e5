"""Three-turn conversations about an image (ConvBench), written turn by turn by an LLM from its facts.

Turn 1 (perception) is written from the image's facts; turn 2 (reasoning) from the facts and turn 1;
turn 3 (creation) from the facts and both earlier turns. Each turn is one call through the shared LLM
client with a prompt from `prompts/conversation/` (the shared part plus the turn's own goal). The facts
and the earlier turns are JSON-quoted and fenced in markers with angle brackets escaped, as the question
prompts do, so text read in a picture (or an earlier answer quoting it) can never pose as instructions.

As a runner stage (`generate:conversation`) a job is one image; its ledger subject carries a hash of the
prompt files and the model, so editing a template makes every image pending again. The calls of a window
of images go out turn by turn: all turn-1 calls together, then the turn-2 calls of the images whose turn 1
came back, then turn 3; an image is yielded as soon as its third turn arrives. Every answered call is in
the LLM cache, and a turn's prompt depends only on the facts and the cached earlier turns, so a run killed
anywhere replays the finished turns from the cache and pays only for the rest.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from benchsmith import runner
from benchsmith.llm import LlmRequest, LlmResult, stream
from benchsmith.records import LEVELS, Conversation, Fact, Image, Provenance, Turn, stable_hash
from benchsmith.settings import UNKEYED, Settings, keyed
from extractors.context import visual_context
from generators import quality
from generators.quality import QualitySettings
from generators.base import WAITING_FOR_FACTS, GeneratorStage, Outcome, json_format, ledger_entry
from generators.llm import LlmWriterSettings, fenced, template_for

BACKEND = "conversation"
PROMPTS_DIR = Path(__file__).with_name("prompts") / "conversation"


class ConversationSettings(LlmWriterSettings):
    default_prompts: ClassVar[Path] = PROMPTS_DIR

    model: str = Field("gpt-4o", json_schema_extra=UNKEYED)  # in each job's subject
    max_tokens: int = 1200


TURN_SCHEMA = json_format("turn", {
    "task": {"type": "string", "minLength": 1},
    "instruction": {"type": "string", "minLength": 5},
    "reference": {"type": "string", "minLength": 1},
    "focus_points": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 8}})


def earlier_block(turns: Sequence[Turn]) -> str:
    """The turns written so far as quoted data, one JSON object a line; '(none yet)' for the first turn."""
    if not turns:
        return "(none yet)"
    return "\n".join(json.dumps({"turn": n, "level": t.level, "instruction": t.instruction,
                                 "reference": t.reference}, ensure_ascii=False) for n, t in enumerate(turns, 1))


def request_for_turn(image: Image, facts: list[Fact], earlier: Sequence[Turn],
                     settings: ConversationSettings) -> LlmRequest:
    """The call that writes the next turn after `earlier` (0, 1 or 2 turns)."""
    level = LEVELS[len(earlier)]
    template = template_for(level, settings.prompts_dir, "goal")
    user = template.user.format_map({
        "facts": fenced(visual_context(image, facts, settings.context_chars)),
        "earlier": fenced(earlier_block(earlier)), "number": len(earlier) + 1, "level": level,
        "goal": template.own})
    return LlmRequest(purpose="generate", model=settings.model,
                      messages=[{"role": "system", "content": template.system}, {"role": "user", "content": user}],
                      temperature=settings.temperature, seed=settings.seed, max_tokens=settings.max_tokens,
                      response_format=TURN_SCHEMA, tag=f"{image.id}:conversation:{level}")


def turn_from(result: LlmResult, level: str) -> Turn:
    draft = result.parsed
    return Turn(level=level, task=draft["task"].strip(), instruction=draft["instruction"].strip(),
                reference=draft["reference"].strip(),
                focus_points=[p.strip() for p in draft["focus_points"] if p.strip()])


def conversation_from(image: Image, turns: list[Turn], results: list[LlmResult],
                      settings: ConversationSettings) -> Conversation:
    """The conversation record, with the three calls' tokens and cost as its provenance."""
    return Conversation(item_id=image.id, turns=turns, meta={"generator": BACKEND}, provenance=Provenance(
        backend=BACKEND, model=settings.model,
        prompt_version="|".join(template_for(level, settings.prompts_dir, "goal").version for level in LEVELS),
        temperature=settings.temperature, seed=settings.seed,
        params={"max_tokens": settings.max_tokens, "llm_calls": [r.key for r in results]},
        tokens_in=sum(r.tokens_in for r in results), tokens_out=sum(r.tokens_out for r in results),
        cost_usd=sum(r.cost_usd for r in results)))


@dataclass(frozen=True)
class Job:
    item: Image


@dataclass
class _Draft:
    turns: list[Turn] = field(default_factory=list)
    results: list[LlmResult] = field(default_factory=list)


class ConversationStage(GeneratorStage):
    """One three-turn conversation per image, as a runner stage."""

    generator = BACKEND
    settings_model = ConversationSettings
    counts = ("conversations", "conversations_kept", "new_conversations", "superseded")

    def __init__(self, settings: Settings, options: ConversationSettings, gate: QualitySettings) -> None:
        super().__init__(settings, options.options)
        self.options = options
        self.gate = gate
        texts = [(options.prompts_dir / f"{name}.yaml").read_text(encoding="utf-8") for name in ("_shared", *LEVELS)]
        self._subject_key = stable_hash(stable_hash(texts, length=12), options.model, length=12)

    @classmethod
    def stages(cls, settings: Settings, options) -> list[ConversationStage]:
        """The conversation generator's stage, from the `generate` settings (its own key and `quality`)."""
        return [cls(settings, options.part(cls.generator), options.quality)]

    def windows(self) -> tuple[int, int | None]:
        return self.options.batch_size, 16  # an image is stored after its third turn

    def config_key(self) -> str:
        return runner.config_key(BACKEND, keyed(self.options), self.gate.model_dump(mode="json"))

    def units(self, context: runner.StageContext) -> list[Job]:
        return [Job(item) for item in context.store.get_items(kind="image")]

    def subject(self, job: Job) -> str:
        return f"{job.item.id}:conversation:{self._subject_key}"

    def process(self, jobs: Sequence[Job], context: runner.StageContext) -> Iterator[tuple[Job, Outcome]]:
        facts = context.store.get_facts(sorted({j.item.id for j in jobs}))
        for job in jobs:
            if not facts[job.item.id]:  # nothing extracted yet: left for a run after `benchsmith extract`
                yield job, Outcome(failure=WAITING_FOR_FACTS, finished=False)
        active = [job for job in jobs if facts[job.item.id]]
        drafts = {job.item.id: _Draft() for job in active}
        for level in LEVELS:
            calls = [(job, request_for_turn(job.item, facts[job.item.id], drafts[job.item.id].turns, self.options))
                     for job in active]
            active = []
            for index, result in stream(self.client(context), [request for _job, request in calls]):
                job, _request = calls[index]
                outcome = self._next_turn(job, drafts[job.item.id], level, result)
                if outcome is None:
                    active.append(job)
                else:
                    yield job, outcome

    def _next_turn(self, job: Job, draft: _Draft, level: str, result: LlmResult) -> Outcome | None:
        """Add the turn in `result` to the draft: the job's outcome when it is over, None when it goes on."""
        failed = self.outcome_of(result, lambda: draft.turns.append(turn_from(result, level)), f"turn {level}: ")
        if failed is not None:
            return failed
        draft.results.append(result)
        if len(draft.turns) < len(LEVELS):
            return None
        return Outcome([conversation_from(job.item, draft.turns, draft.results, self.options)])

    def commit(self, context: runner.StageContext, pairs: list[tuple[Job, Outcome]],
               report: runner.StageReport) -> list[runner.Outcome]:
        store = context.store
        made = [c.model_copy(update={"meta": c.meta | {"config": self._subject_key}})
                for _job, o in pairs if o.finished for c in o.items]
        report.counters["conversations"] += len(made)
        finished = sorted({job.item.id for job, o in pairs if o.finished and not o.failure})
        older = [c.id for item_id in finished for c in store.get_conversations(item_id=item_id, status="candidate")
                 if c.meta.get("config") != self._subject_key and c.id not in {m.id for m in made}]
        if older:  # written under other prompts or another model: kept, no longer a candidate
            report.counters["superseded"] += store.move("conversation",
                older, "superseded", stage="generate", reason="generated again after its settings changed")
        kept, dropped = quality.conversation_gate(made, self.gate)
        report.counters["conversations_kept"] += len(kept)
        report.counters.update(f"dropped: {v.rule}" for _c, v in dropped)
        report.counters["new_conversations"] += store.add_conversations(
            kept + [c for c, _v in dropped], stage="generate", verdicts_for_new=[v for _c, v in dropped])
        return [ledger_entry(self.subject(job), outcome, report,
                             {"conversation": outcome.items[0].id} if outcome.items else {})
                for job, outcome in pairs]
