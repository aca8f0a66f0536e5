"""Evaluation as a runner stage: one subject per pass of a question, one prediction row per subject.

An eval run is one model on one source under one protocol and configuration; its id hashes all of
that, and is the stage's config key in the work ledger. Rerunning finds every pass finished and builds
no model and sends no request; a run stopped part way goes on from the passes not yet stored. A
question whose content changes gets new subjects, so it is asked again. `evaluate` runs any protocol's
stage (this one, or ConvEval's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from benchsmith import runner
from benchsmith.records import stable_hash
from evaluation.adapters import Adapter, EvalError
from evaluation.judge import decide
from evaluation.contract import BaseProtocol
from evaluation.records import EvalQuestion, ModelAnswer, Pass
from evaluation.settings import EvalSettings
from evaluation.sources import Source
from evaluation.templates import load_templates

STAGE = "evaluate"


@dataclass
class EvalRun:
    """One model on one source under one protocol and configuration: the row the store keeps."""

    id: str
    model: str
    adapter: str
    source: str
    protocol: str
    config: dict[str, Any]


class RunStage(runner.Stage):
    """The stage of one eval run: its units are planned with it, and its config key is the run's id."""

    window = 64

    def __init__(self, run: EvalRun, units: Sequence[Any]) -> None:
        self.run = run
        self.planned = list(units)

    def config_key(self) -> str:
        return self.run.id

    def units(self, context: runner.StageContext) -> list[Any]:
        return self.planned

    def subject(self, unit: Any) -> str:
        return unit.subject

    def windows(self) -> tuple[int, int | None]:
        return self.window, None


class EvalStage(RunStage):
    name = STAGE

    def __init__(self, run: EvalRun, units: Sequence[Pass], make_adapter: Callable[[], Adapter], window: int) -> None:
        super().__init__(run, units)
        self._make_adapter = make_adapter
        self.window = window
        self.adapter: Adapter | None = None

    def prepare(self, context: runner.StageContext, units: Sequence[Pass]) -> None:
        """The adapter, built only when something is pending."""
        self.adapter = self._make_adapter()
        if hasattr(self.adapter, "prepare"):
            self.adapter.prepare(list({p.question.question_id: p.question for p in self.planned}.values()))

    def process(self, units: Sequence[Pass], context: runner.StageContext) -> Iterator[tuple[Pass, ModelAnswer]]:
        yield from self.adapter.predict(units)

    def commit(self, context: runner.StageContext, pairs: list[tuple[Pass, ModelAnswer]],
               report: runner.StageReport) -> list[runner.Outcome]:
        rows, outcomes = [], []
        for p, answer in pairs:
            if answer.retry:
                outcomes.append(runner.Outcome(p.subject, "retry", answer.retry))
                continue
            status = "skipped" if answer.skipped else "ok" if answer.choice is not None else "unmatched"
            choice = p.original(answer.choice)
            correct = decide(answer.votes) if answer.votes else choice == p.question.answer
            rows.append({"run_id": self.run.id, "subject": p.subject, "question_id": p.question.question_id,
                         "pass_key": p.key, "dimension": p.question.dimension, "option_order": list(p.order),
                         "template": p.template, "answer": p.question.answer, "choice": choice,
                         "correct": None if answer.skipped else correct, "status": status,
                         "matched_by": answer.matched_by, "raw": answer.raw[:4000],
                         "scores": [float(s) for s in answer.scores], "votes": list(answer.votes),
                         "reason": answer.skipped})
            outcomes.append(runner.Outcome(p.subject, "failed" if answer.skipped else "done", answer.skipped))
            report.counters[status] += 1
        context.store.add_predictions(rows)
        return outcomes

    def release(self) -> None:
        if self.adapter is not None:
            self.adapter.release()


def plan_stage(store, settings, source: Source, model: str, shown: BaseProtocol) -> EvalStage:
    """The stage that evaluates `model` on `source`'s questions under question protocol `shown`, its run
    recorded under an id that hashes everything that shapes the answers; nothing is loaded yet."""
    options = settings.section(STAGE, EvalSettings)
    templates = load_templates(options.prompts or None)
    adapter = options.model(model)
    kind = "likelihood" if adapter.kind == "likelihood" else "choice"   # answering in words: choice wordings
    wordings = getattr(templates, kind)
    used = shown.templates()
    if used > len(wordings):
        raise EvalError(f"protocol {shown.name} asks for {used} prompt wordings but the prompt file has only "
                        f"{len(wordings)} {kind} templates")
    config = {"adapter": adapter.identity(), "templates": wordings[:used] if adapter.kind != "blind" else [],
              "protocol": shown.identity(),
              "matcher": templates.matcher if getattr(adapter, "matcher_model", "") else "",
              "judge": [p.model_dump() for p in templates.judge] if getattr(adapter, "judge_model", "") else []}
    run = EvalRun(stable_hash(model, source.label, shown.name, config), model, adapter.kind, source.label,
                  shown.name, config)
    store.add_eval_run(asdict(run))
    return EvalStage(run, passes(source.items, shown),
                     lambda: adapter.build(model, templates=templates, settings=settings, store=store), options.window)


def evaluate(store, stage, *, limit: int | None = None,
             progress: Callable[[int], None] | None = None) -> runner.StageReport:
    """Do a protocol's stage's pending units; results land in the store as they arrive."""
    try:
        return runner.run(stage, store, limit=limit, progress=progress)
    finally:
        stage.release()


def passes(questions: Iterable[EvalQuestion], shown: BaseProtocol) -> list[Pass]:
    return [p for q in questions for p in shown.passes(q)]

