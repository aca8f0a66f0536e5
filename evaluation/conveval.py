"""ConvEval, the protocol `conveval`: a model holds each three-turn conversation, and a judge LLM grades
it (ConvBench). Settings under `evaluate.conveval`; `eval run --protocol conveval`, `eval board
--protocol conveval`.

The model answers turn 1, then turn 2 with its own first answer in context, then turn 3 with both, the
image in the first message, through its adapter's `converse` (the `openai` adapter: any OpenAI-compatible
chat endpoint). Then a judge LLM grades each answered turn, and the conversation as a whole, two ways:

- direct: a score from 1 to 10 with a short rationale, against the reference answer and the turn's
  focus points;
- pairwise: the model's conversation against an opponent's on the same instructions, shown as A and B
  in an order fixed by a hash (so position bias averages out): win, tie or lose for the model. The
  opponent is `reference_model` (another model under `evaluate.models`, answering the same way), or the
  human-checked reference answers when that is empty, as ConvBench did.

Every judge prompt in the prompt file is asked; the votes are read and pooled as evaluation/judge.py
says (the median rating, the most common verdict).

The ablation separates perception failures from reasoning failures: setting `perception_given` puts
the reference answer of turn 1 in place of the model's own, so turns 2 and 3 start from a perfect
perception; `perception_reasoning_given` gives turns 1 and 2. Only the turns the model answered are
graded. On the board, a rise from `model` to `perception_given` on turn 2 is reasoning lost to
perception errors.

As a runner stage a subject is one conversation under one setting. Every call goes through the shared
LLM client, so answers and judgements are cached: a run stopped anywhere (even mid-judging) resumes
without repeating a call, and a rerun sends nothing.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from benchsmith import runner
from benchsmith.llm import LlmClient, LlmOptions, LlmRequest, LlmResult, stream
from benchsmith.records import LEVELS, Turn, stable_hash
from benchsmith.settings import Strict
from evaluation.adapters import Adapter, EvalError
from evaluation.board import cell
from evaluation.contract import BaseProtocol
from evaluation.judge import judge_request, pooled_outcome, pooled_score, read_rating, read_verdict
from evaluation.records import EvalConversation
from evaluation.settings import EvalSettings
from evaluation.stage import EvalRun, RunStage
from evaluation.templates import load_prompt_file, load_templates

STAGE = "evaluate:conversations"
PROMPTS = Path(__file__).with_name("conveval.yaml")
GIVEN: dict[str, int] = {"model": 0, "perception_given": 1, "perception_reasoning_given": 2}
OVERALL = 0                     # the target number of the conversation as a whole; turns are 1-3
Setting = Literal["model", "perception_given", "perception_reasoning_given"]


class ConvEvalSettings(Strict):
    judge_model: str = "gpt-4o"
    reference_model: str = ""            # pairwise opponent, a name under evaluate.models; "": the references
    settings: list[Setting] = ["model", "perception_given", "perception_reasoning_given"]
    answer_max_tokens: int = Field(1024, ge=16)
    judge_max_tokens: int = Field(800, ge=16)
    prompts: str = ""                    # a file shaped like evaluation/conveval.yaml; "" for that one
    llm: dict[str, Any] = Field(default_factory=dict)   # the judge's LlmOptions: concurrency, limits, retries


class JudgePrompts(Strict):
    direct: list[str] = Field(min_length=1)
    pairwise: list[str] = Field(min_length=1)


@dataclass(frozen=True)
class Unit:
    conversation: EvalConversation
    setting: str

    @property
    def subject(self) -> str:
        return f"{self.conversation.conversation_id}:{self.conversation.content_hash[:12]}:{self.setting}"

    @property
    def targets(self) -> list[int]:
        """The turns the model answers itself (1-based), then the whole conversation."""
        return [n for n in range(1, len(LEVELS) + 1) if n > GIVEN[self.setting]] + [OVERALL]


def model_is_a(subject: str, target: int, prompt: int) -> bool:
    """Where the model's conversation is shown in one pairwise prompt: fixed by a hash, so it is the same
    on a rerun (the call is cached) and A and B are each the model about half the time."""
    return int(stable_hash(subject, target, prompt, length=8), 16) % 2 == 0


# -- prompts ------------------------------------------------------------------------------------------

def _target_name(target: int) -> str:
    return "the conversation as a whole" if target == OVERALL else f"turn {target} ({LEVELS[target - 1]})"


def _focus(turns: Sequence[Turn], target: int) -> str:
    if target == OVERALL:
        points = ["answer every instruction, each building correctly on the earlier answers",
                  *[f"turn {n}: {p}" for n, t in enumerate(turns, 1) for p in t.focus_points]]
    else:
        points = list(turns[target - 1].focus_points) or ["answer the instruction correctly"]
    return "\n".join(f"- {p}" for p in points)


def _fenced(text: str) -> str:
    """Model output inside a marker block: nothing in it may close the block."""
    return text.replace("<<<", "‹‹‹").replace(">>>", "›››")


def dialogue(turns: Sequence[Turn], answers: Sequence[str], *, references: bool) -> str:
    lines = []
    for n, (turn, answer) in enumerate(zip(turns, answers), 1):
        lines += [f"Turn {n} ({turn.level}). User: {_fenced(turn.instruction)}", f"Assistant: {_fenced(answer)}"]
        if references:
            lines.append(f"Reference answer: {_fenced(turn.reference)}")
        lines.append("")
    return "\n".join(lines).strip()


def reference_block(turns: Sequence[Turn]) -> str:
    return "\n".join(f"Turn {n} ({t.level}). User: {_fenced(t.instruction)}\nReference answer: {_fenced(t.reference)}"
                     for n, t in enumerate(turns, 1))


def judge_requests(model: str, prompts: JudgePrompts, unit: Unit, answers: Sequence[str], opponent: Sequence[str],
                   max_tokens: int) -> list[tuple[tuple[str, int, int], LlmRequest]]:
    """Every judge call on a graded conversation: each target under each direct prompt, then under each
    pairwise one; each keyed by (grading, target, prompt number)."""
    turns = unit.conversation.turns
    talk = dialogue(turns, answers, references=True)
    mine, theirs = dialogue(turns, answers, references=False), dialogue(turns, opponent, references=False)
    calls = [(("direct", target, k), prompt.format(dialogue=talk, target=_target_name(target),
                                                   focus_points=_focus(turns, target)))
             for target in unit.targets for k, prompt in enumerate(prompts.direct)]
    for target in unit.targets:
        for k, prompt in enumerate(prompts.pairwise):
            a, b = (mine, theirs) if model_is_a(unit.subject, target, k) else (theirs, mine)
            calls.append((("pairwise", target, k), prompt.format(
                references=reference_block(turns), dialogue_a=a, dialogue_b=b, target=_target_name(target),
                focus_points=_focus(turns, target))))
    return [(key, judge_request(model, text, max_tokens, unit.subject)) for key, text in calls]


# -- the stage ----------------------------------------------------------------------------------------

@dataclass
class Graded:
    """One conversation under one setting: the answers and the judges' pooled and raw votes."""

    answers: list[str] = field(default_factory=list)
    opponent: list[str] = field(default_factory=list)
    direct: dict[int, dict[str, Any]] = field(default_factory=dict)      # target -> votes, rationales, score
    pairwise: dict[int, dict[str, Any]] = field(default_factory=dict)    # target -> votes, outcome
    retry: str = ""


class ConvEvalStage(RunStage):
    name = STAGE
    window = 16                     # conversation-settings handed over at a time: up to ~60 calls each

    def __init__(self, run: EvalRun, conversations: Sequence[EvalConversation], settings, adapters: dict[str, Adapter],
                 options: ConvEvalSettings, prompts: JudgePrompts, store=None) -> None:
        super().__init__(run, [Unit(c, s) for c in conversations for s in options.settings])
        self.adapters = adapters    # the model's and the reference model's: each has `converse`
        self.options = options
        self.prompts = prompts
        self.judge = LlmClient(settings, LlmOptions.model_validate(options.llm), store=store)
        self.calls: Counter = Counter()

    def process(self, units: Sequence[Unit], context: runner.StageContext) -> Iterator[tuple[Unit, Graded]]:
        graded = {}
        for u in units:
            given = [t.reference for t in u.conversation.turns[:GIVEN[u.setting]]]
            graded[u.subject] = Graded(given, list(given) if self.options.reference_model
                                       else [t.reference for t in u.conversation.turns])
        speakers = [self.run.model] + ([self.options.reference_model] if self.options.reference_model else [])
        for turn in range(len(LEVELS)):
            for name in speakers:
                self._answer_turn(name, turn, [u for u in units if not graded[u.subject].retry], graded)
        yield from ((u, graded[u.subject]) for u in units if graded[u.subject].retry)
        yield from self._judge([u for u in units if not graded[u.subject].retry], graded)

    def _answer_turn(self, name: str, turn: int, units: Sequence[Unit], graded: dict[str, Graded]) -> None:
        mine = name == self.run.model
        wanted = [u for u in units if turn >= GIVEN[u.setting]]
        adapter = self.adapters[name]
        requests = [adapter.turn_request(u.conversation.frames, [t.instruction for t in u.conversation.turns],
                                         (graded[u.subject].answers if mine else graded[u.subject].opponent)[:turn],
                                         self.options.answer_max_tokens, u.subject) for u in wanted]
        for index, result in adapter.converse(requests):
            state = graded[wanted[index].subject]
            self._count(result, "answer")
            if not result.ok:
                state.retry = state.retry or f"{name}: {result.reason}"
                continue
            (state.answers if mine else state.opponent).append(result.content)

    def _judge(self, units: Sequence[Unit], graded: dict[str, Graded]) -> Iterator[tuple[Unit, Graded]]:
        calls = [(u, key, r) for u in units for key, r in judge_requests(
            self.options.judge_model, self.prompts, u, graded[u.subject].answers, graded[u.subject].opponent,
            self.options.judge_max_tokens)]
        left = Counter(u.subject for u, _key, _r in calls)
        votes: dict[str, dict[tuple[str, int, int], str | None]] = {u.subject: {} for u in units}
        for index, result in stream(self.judge, [r for _u, _key, r in calls]):
            unit, key, _request = calls[index]
            self._count(result, "judge")
            state = graded[unit.subject]
            if not result.ok:
                state.retry = state.retry or f"judge: {result.reason}"
            votes[unit.subject][key] = result.content if result.ok else None
            left[unit.subject] -= 1
            if left[unit.subject] == 0:
                yield unit, self._pooled(unit, state, votes.pop(unit.subject))

    def _pooled(self, unit: Unit, state: Graded, texts: dict[tuple[str, int, int], str | None]) -> Graded:
        if state.retry:
            return state
        for target in unit.targets:
            ratings = [read_rating(texts[("direct", target, k)]) for k in range(len(self.prompts.direct))]
            state.direct[target] = {"votes": ratings, "score": pooled_score(ratings),
                                    "rationales": [texts[("direct", target, k)][-1500:]
                                                   for k in range(len(self.prompts.direct))]}
            outcomes = [read_verdict(texts[("pairwise", target, k)], model_is_a(unit.subject, target, k))
                        for k in range(len(self.prompts.pairwise))]
            state.pairwise[target] = {"votes": outcomes, "outcome": pooled_outcome(outcomes)}
        return state

    def _count(self, result: LlmResult, what: str) -> None:
        self.calls.update({f"{what}_calls": 1, f"{what}_cached": int(result.cached),
                           "tokens_in": result.tokens_in, "tokens_out": result.tokens_out})

    def commit(self, context: runner.StageContext, pairs: list[tuple[Unit, Graded]],
               report: runner.StageReport) -> list[runner.Outcome]:
        rows, outcomes = [], []
        for unit, state in pairs:
            if state.retry:
                outcomes.append(runner.Outcome(unit.subject, "retry", state.retry))
                continue
            rows.append({"run_id": self.run.id, "subject": unit.subject,
                         "conversation_id": unit.conversation.conversation_id, "setting": unit.setting,
                         "answers": state.answers, "opponent": state.opponent,
                         "direct": {str(k): v for k, v in state.direct.items()},
                         "pairwise": {str(k): v for k, v in state.pairwise.items()}})
            outcomes.append(runner.Outcome(unit.subject, "done"))
            report.counters["graded"] += 1
        context.store.add_conversation_evals(rows)
        report.counters.update(self.calls)
        report.counters["http_calls"] = self.judge.http_calls + sum(a.client.http_calls for a in self.adapters.values())
        self.calls.clear()
        return outcomes

    def release(self) -> None:
        for adapter in self.adapters.values():
            adapter.release()


class ConvEval(BaseProtocol):
    """Conversations held by a chat model and graded by judges (module docstring)."""

    settings_model = ConvEvalSettings
    items = "conversations"

    def stage(self, store, settings, source, model: str) -> ConvEvalStage:
        """The stage that holds and grades `model`'s conversations on `source`, its run recorded."""
        options = settings.section("evaluate", EvalSettings)
        prompts = load_prompt_file(JudgePrompts, self.settings.prompts, PROMPTS, "evaluate.conveval.prompts")
        templates = load_templates(options.prompts or None)
        adapters = {}
        for name in dict.fromkeys([model, self.settings.reference_model or model]):
            adapters[name] = options.model(name).build(name, templates=templates, settings=settings, store=store)
            if not hasattr(adapters[name], "converse"):  # an adapter that can hold a conversation has `converse`
                adapters[name].release()
                raise EvalError(f"model {name!r} is of kind {options.models[name].kind}; conversations need a "
                                "chat model (kind: openai)")
        reference = self.settings.reference_model
        config = {"model": options.models[model].identity(),
                  "opponent": options.models[reference].identity() if reference else "references",
                  "judge_model": self.settings.judge_model, "prompts": prompts.model_dump(),
                  "answer_max_tokens": self.settings.answer_max_tokens,
                  "judge_max_tokens": self.settings.judge_max_tokens}
        run = EvalRun(stable_hash("conveval", model, source.label, config), model, "openai", source.label, "conveval",
                      config)
        store.add_eval_run(asdict(run))
        return ConvEvalStage(run, source.items, settings, adapters, self.settings, prompts, store)

    def board(self, store, settings, source, folder: Path) -> tuple[str, dict[str, Any], int]:
        """conversations.md and .json: per model and setting, the scores of its runs' current rows."""
        current = {f"{c.conversation_id}:{c.content_hash[:12]}" for c in source.items}
        runs = [r for r in store.eval_runs(source.label) if r["protocol"] == self.name]
        boards = {r["model"]: scores([row for row in store.conversation_evals([r["id"]])
                                      if row["subject"].rsplit(":", 1)[0] in current]) for r in runs}
        opponents = {json.dumps(r["config"]["opponent"], sort_keys=True) for r in runs}
        markdown = board_markdown(boards, "the reference answers" if opponents <= {'"references"'}
                                  else "the reference model")
        (folder / "conversations.md").write_text(markdown, encoding="utf-8")
        (folder / "conversations.json").write_text(json.dumps(boards, indent=1), encoding="utf-8")
        return markdown, boards, len(runs)


# -- the board ----------------------------------------------------------------------------------------

def scores(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per setting: the mean direct score and the pairwise win, tie and lose rates of each target
    (S1-S3 the turns, S0 the whole conversation), and R2 = mean(S1..S3), R1 = (R2 + S0) / 2 as ConvBench
    reports them, over the conversations whose every target the judges could score."""
    out: dict[str, dict[str, Any]] = {}
    for setting in GIVEN:
        mine = [r for r in rows if r["setting"] == setting]
        if not mine:
            continue
        entry: dict[str, Any] = {"conversations": len(mine)}
        for target in sorted({int(t) for r in mine for t in r["direct"]}):
            key = "S0" if target == OVERALL else f"S{target}"
            direct = [r["direct"][str(target)]["score"] for r in mine if str(target) in r["direct"]]
            direct = [d for d in direct if d is not None]
            entry[f"direct_{key}"] = round(sum(direct) / len(direct), 3) if direct else None
            outcomes = [r["pairwise"][str(target)]["outcome"] for r in mine if str(target) in r["pairwise"]]
            outcomes = [o for o in outcomes if o is not None]
            for label in ("win", "tie", "lose"):
                entry[f"{label}_{key}"] = round(outcomes.count(label) / len(outcomes), 4) if outcomes else None
        turns = [entry.get(f"direct_S{n}") for n in range(1, len(LEVELS) + 1)]
        if all(v is not None for v in turns) and entry.get("direct_S0") is not None:
            entry["direct_R2"] = round(sum(turns) / len(turns), 3)
            entry["direct_R1"] = round((entry["direct_R2"] + entry["direct_S0"]) / 2, 3)
        out[setting] = entry
    return out


def board_markdown(runs: dict[str, dict[str, dict[str, Any]]], opponent: str) -> str:
    """One table per grading: rows are models x settings, columns the turns and the whole conversation."""
    direct, pairwise = [], []
    for model, by_setting in runs.items():
        for setting, e in by_setting.items():
            direct.append(f"| {model} | {setting} | {e['conversations']} | " + " | ".join(
                cell(e.get(f"direct_{k}")) for k in ("S1", "S2", "S3", "S0", "R2", "R1")) + " |")
            pairwise.append(f"| {model} | {setting} | " + " | ".join(
                "-" if e.get(f"win_{k}") is None else f"{cell(e[f'win_{k}'], '.1%')} ({cell(e[f'tie_{k}'], '.1%')})"
                for k in ("S1", "S2", "S3", "S0")) + " |")
    return "\n".join(["# ConvEval", "", "Direct grading (1-10, median of the judge prompts, mean over conversations). "
                      "S1 perception, S2 reasoning, S3 creation, S0 the whole conversation; R2 = mean(S1..S3), "
                      "R1 = (R2 + S0) / 2.", "",
                      "| model | setting | n | S1 | S2 | S3 | S0 | R2 | R1 |", "|---|---|---|---|---|---|---|---|---|",
                      *direct, "", f"Pairwise against {opponent}: win rate (tie rate) per target.", "",
                      "| model | setting | S1 | S2 | S3 | S0 |", "|---|---|---|---|---|---|", *pairwise, "",
                      "Settings: `model`, the model's own answers throughout; `perception_given`, turn 1 replaced by "
                      "its reference; `perception_reasoning_given`, turns 1 and 2 replaced. A rise on S2 from "
                      "`model` to `perception_given` is reasoning lost to perception errors.", ""])
