"""Blind filter: drop questions that text-only solvers answer without seeing the image.

Each configured solver answers every pending question under N circular rotations of its options (as
in MMBench's CircularEval). A solver *knows* a question only if it picks the right option under every
rotation, so a lucky guess, or a tie broken by position, knows nothing. A drop rule then decides:
- `seed`: drop when every solver knows it (SEED-Bench's rule with its three LLMs);
- `mmstar`: drop when more than `max_right` solvers know it (MMStar dropped when more than 2 of 8 did).

Every judged question gets a verdict from stage `blind` naming the rule and each solver's choices and
scores; a dropped question moves to `dropped`, a kept one stays `candidate` for review. What has been
judged is kept in the work ledger under a hash of the rule and the solvers, so changing either judges
every candidate again (the pending ones and the ones kept so far), and nothing else. The report
(blind accuracy per solver and dimension, before and after the filter, and drop rates) is computed from
those verdicts alone, so it can be rebuilt from the store at any time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from benchsmith import runner
from benchsmith.records import Question, Verdict, rotation
from benchsmith.settings import SettingsError, Strict, keyed
from benchsmith.store import Store
from filters.solvers import AnySolverConfig, Prediction, Query, Solver, build_solver

STAGE = "blind"


class BlindSettings(Strict):
    rule: Literal["seed", "mmstar"] = "mmstar"
    max_right: int = Field(0, ge=0)       # mmstar: drop when more than this many solvers know the answer
    rotations: int = Field(4, ge=1, le=4)  # circular option orders each solver answers under
    chunk_size: int = Field(1000, ge=1)    # questions judged and written per store transaction
    release_models: bool = False           # free each model after its turn on a chunk (several big LLMs on one GPU)
    solvers: list[AnySolverConfig] = Field(default_factory=list)


class FilterSection(Strict):
    """The `filter` settings section."""

    blind: BlindSettings = BlindSettings()


def blind_settings(settings) -> BlindSettings:
    return settings.section("filter", FilterSection).blind


# -- rotations ---------------------------------------------------------------------------------------

def answer_rotated(solver: Solver, queries: Sequence[Query], rotations: int) -> list[dict[str, Any] | None]:
    """Each query's choices under each rotation, mapped back to original option indices, and the
    per-option scores averaged over rotations, in original order; None if any rotation went unanswered."""
    per_shift: list[list[Prediction | None]] = [
        solver.answer([Query(q.text, tuple(q.options[i] for i in rotation(len(q.options), shift))) for q in queries])
        for shift in range(rotations)]
    out: list[dict[str, Any] | None] = []
    for index, query in enumerate(queries):
        n = len(query.options)
        predictions = [p[index] for p in per_shift]
        if any(p is None for p in predictions):
            out.append(None)
            continue
        choices, totals = [], [0.0] * n
        for shift, prediction in enumerate(predictions):
            order = rotation(n, shift)
            choices.append(order[prediction.choice])
            for shown, score in enumerate(prediction.scores):
                totals[order[shown]] += score
        out.append({"choices": choices, "scores": [round(t / rotations, 5) for t in totals]})
    return out


def outcome(answer: int, answered: dict[str, Any]) -> dict[str, Any]:
    """One solver on one question: `right` is the share of rotations it got right, `knows` all of them."""
    right = sum(c == answer for c in answered["choices"]) / len(answered["choices"])
    return {**answered, "right": right, "knows": right == 1.0}


# -- drop rules --------------------------------------------------------------------------------------

def judge(question: Question, outcomes: dict[str, dict[str, Any]], config: BlindSettings) -> Verdict:
    knowing = [name for name, o in outcomes.items() if o["knows"]]
    n = len(outcomes)
    if config.rule == "seed":
        drop = n > 0 and len(knowing) == n
        threshold = f"all {n}"
    else:
        drop = len(knowing) > config.max_right
        threshold = f"more than {config.max_right} of {n}"
    reason = (f"{len(knowing)} of {n} blind solvers answer it under every option order "
              f"({', '.join(knowing)}); rule {config.rule} drops at {threshold}") if drop else ""
    return Verdict(subject_id=question.id, subject_kind="question", stage=STAGE, rule=config.rule,
                   passed=not drop, reason=reason,
                   details={"answer": question.answer, "dimension_id": question.dimension_id,
                            "n_options": len(question.options), "knowing": knowing, "solvers": outcomes})


# -- the stage ---------------------------------------------------------------------------------------

def judge_questions(questions: Sequence[Question], solvers: Sequence[Solver],
                    config: BlindSettings) -> list[Verdict]:
    """Pure: verdicts for the questions every solver could answer, given the solvers. No store involved."""
    queries = [Query(q.text, tuple(q.options)) for q in questions]
    answers = {}
    for solver in solvers:
        answers[solver.name] = answer_rotated(solver, queries, config.rotations)
        if config.release_models:
            solver.release()
    return [judge(q, {name: outcome(q.answer, a[i]) for name, a in answers.items()}, config)
            for i, q in enumerate(questions) if all(a[i] is not None for a in answers.values())]


class BlindStage(runner.Stage):
    """The blind filter as a runner stage: subjects are candidate questions, results their verdicts."""

    name = STAGE
    label = "blind filter"

    def __init__(self, config: BlindSettings, solvers: Sequence[Solver]) -> None:
        self.config = config
        self.solvers = solvers

    def config_key(self) -> str:
        solvers = [keyed(s) for s in self.config.solvers]  # how fast a solver answers is not keyed
        return runner.config_key(self.config.rule, self.config.max_right, self.config.rotations, solvers)

    def units(self, context: runner.StageContext) -> list[Question]:
        return context.store.get_questions(status="candidate")

    def subject(self, question: Question) -> str:
        return question.id

    def windows(self) -> tuple[int, int | None]:
        return self.config.chunk_size, None

    def prepare(self, context: runner.StageContext, questions: Sequence[Question]) -> None:
        """Learners fit on every question past the quality gate, whatever became of it since: a pool the
        store's content fixes, so a question's verdict is the same whether the filter ran once or in parts
        (after a kill, in shards, or as questions arrived), whatever was dropped or reviewed between."""
        if any(hasattr(s, "fit") for s in self.solvers):
            fit_learners(self.solvers, context.store.questions_past_gate())

    def process(self, questions: Sequence[Question], context: runner.StageContext):
        verdicts = {v.subject_id: v for v in judge_questions(questions, self.solvers, self.config)}
        for question in questions:
            yield question, verdicts.get(question.id)

    def commit(self, context: runner.StageContext, pairs, report: runner.StageReport) -> list[runner.Outcome]:
        verdicts = [v for _q, v in pairs if v is not None]
        write(context.store, verdicts)
        report.counters["dropped"] += sum(not v.passed for v in verdicts)
        report.counters["kept"] += sum(v.passed for v in verdicts)
        return [runner.Outcome(q.id, "done") if v is not None
                else runner.Outcome(q.id, "retry", "a solver could not answer it now") for q, v in pairs]


def fit_learners(solvers: Sequence[Solver], pool: Sequence[Question]) -> None:
    """Solvers that learn from the questions themselves see the whole pool first; each then judges a
    question only with a model that did not train on that question's image."""
    learners = [s for s in solvers if hasattr(s, "fit")]
    if learners:
        from filters.solvers.learned import Labelled
        # in id order: the fit must not depend on the order the store returns rows in, or borderline
        # questions are judged differently
        labelled = [Labelled(q.text, tuple(q.options), q.answer, q.item_id) for q in sorted(pool, key=lambda q: q.id)]
        for solver in learners:
            solver.fit(labelled)


def apply(store: Store, config: BlindSettings, solvers: Sequence[Solver], *, limit: int | None = None,
          subjects: Collection[str] | None = None, progress: Callable[[int], None] | None = None) -> runner.StageReport:
    """Judge every candidate question not judged under this rule and these solvers, chunk by chunk; the
    runner's report counts `dropped` and `kept`, and as `retry_later` the questions a solver could not
    answer now (failed calls), which the next run judges.

    Each chunk's drops and verdicts are written together before the next chunk, so a crash loses only
    the chunk in flight and a rerun picks up where it stopped.
    """
    stage = BlindStage(config, solvers)
    if not solvers:  # nothing can judge: say only what waits
        return runner.StageReport(STAGE, stage.config_key(), pending=len(runner.pending(stage, store)[:limit]))
    return runner.run(stage, store, limit=limit, subjects=subjects, progress=progress)


def counts(report: runner.StageReport) -> dict[str, int]:
    """A run of the filter in its own words: what `filter --json` and the build summary show."""
    return {"pending": report.pending, "judged": report.done, "dropped": report.counters["dropped"],
            "kept": report.counters["kept"], "unanswered": report.retry_later}


def write(store: Store, verdicts: Sequence[Verdict]) -> None:
    dropped = [v for v in verdicts if not v.passed]
    kept = [v for v in verdicts if v.passed]
    if dropped:
        store.move("question", [v.subject_id for v in dropped], "dropped", stage=STAGE,
                   reason=f"answerable without the image (blind filter, rule {dropped[0].rule})",
                   verdicts_to_add=dropped)
    store.add_verdicts(kept)


def solvers_from(config: BlindSettings, **context: Any) -> list[Solver]:
    names = [c.label for c in config.solvers]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SettingsError(f"filter.blind.solvers: names must be unique, repeated: {', '.join(repeated)} "
                            "(give each entry its own `name`)")
    return [build_solver(c, **context) for c in config.solvers]


# -- the report --------------------------------------------------------------------------------------

def wilson(right: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of an accuracy of `right` out of `n`."""
    if n == 0:
        return (0.0, 1.0)
    p = right / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass
class Tally:
    n: int = 0
    right: float = 0.0
    knows: int = 0

    def add(self, right: float, knows: int, n: int = 1) -> None:
        self.n += n
        self.right += right
        self.knows += knows

    @property
    def accuracy(self) -> float | None:
        return self.right / self.n if self.n else None

    @property
    def ci95(self) -> tuple[float, float] | None:
        return wilson(self.right, self.n) if self.n else None


@dataclass
class BlindReport:
    """Blind accuracy (share of rotations answered right, i.e. expected accuracy under a random option
    order) per solver and dimension, before the filter (every judged question) and after it (kept ones)."""

    chance: dict[int, float] = field(default_factory=dict)                      # dimension -> 1 / options
    judged: dict[int, int] = field(default_factory=lambda: defaultdict(int))     # dimension -> questions
    dropped: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    before: dict[tuple[int, str], Tally] = field(default_factory=lambda: defaultdict(Tally))
    after: dict[tuple[int, str], Tally] = field(default_factory=lambda: defaultdict(Tally))

    def drop_rate(self, dimension: int) -> float:
        return self.dropped[dimension] / self.judged[dimension] if self.judged[dimension] else 0.0

    def solver_rows(self) -> list[dict[str, Any]]:
        """Per dimension and solver, then per solver over every dimension (`dimension_id` None), with
        95% Wilson intervals."""
        rows = []
        overall = {kept: self._totals(kept) for kept in (False, True)}
        cells = [*sorted(self.before.items()), *(((None, solver), t) for solver, t in overall[False].items())]
        for (dimension, solver), before in cells:
            after = (self.after.get((dimension, solver)) if dimension is not None else overall[True].get(solver)) or Tally()
            chance = self.chance[dimension] if dimension is not None else self._mean_chance()
            rows.append({"dimension_id": dimension, "solver": solver, "chance": chance,
                         "n_before": before.n, "accuracy_before": before.accuracy, "ci95_before": before.ci95,
                         "knows_before": before.knows / before.n if before.n else None,
                         "n_after": after.n, "accuracy_after": after.accuracy, "ci95_after": after.ci95})
        return rows

    def _totals(self, kept_only: bool) -> dict[str, Tally]:
        totals: dict[str, Tally] = defaultdict(Tally)
        for (_dimension, solver), tally in (self.after if kept_only else self.before).items():
            totals[solver].add(tally.right, tally.knows, tally.n)
        return dict(sorted(totals.items()))

    def _mean_chance(self) -> float | None:
        """Chance over every judged question."""
        n = sum(self.judged.values())
        return sum(self.chance[d] * k for d, k in self.judged.items()) / n if n else None

    def overall(self, kept_only: bool) -> dict[str, float | None]:
        """Per solver across dimensions."""
        return {solver: t.accuracy for solver, t in self._totals(kept_only).items()}

    def as_dict(self) -> dict[str, Any]:
        return {"dimensions": {d: {"judged": self.judged[d], "dropped": self.dropped[d],
                                   "drop_rate": self.drop_rate(d), "chance": self.chance[d]}
                               for d in sorted(self.judged)},
                "solvers": self.solver_rows(),
                "accuracy_before": self.overall(kept_only=False), "accuracy_after": self.overall(kept_only=True)}


def report_from(verdicts: Sequence[Verdict]) -> BlindReport:
    report = BlindReport()
    for verdict in verdicts:
        d = verdict.details
        if "solvers" not in d:  # a verdict recorded without solver outcomes (by hand, or by another tool)
            continue
        dimension = d["dimension_id"]
        report.chance[dimension] = 1 / d["n_options"]
        report.judged[dimension] += 1
        report.dropped[dimension] += not verdict.passed
        for solver, o in d["solvers"].items():
            report.before[(dimension, solver)].add(o["right"], bool(o["knows"]))
            if verdict.passed:
                report.after[(dimension, solver)].add(o["right"], bool(o["knows"]))
    return report


def accuracy_table(report: BlindReport) -> list[dict[str, Any]]:
    """`report.solver_rows()` for people: dimension names, and each accuracy as a percentage with its
    95% interval beside chance. The run report and the dataset card show this table."""
    from benchsmith.dimensions import registry

    def cell(accuracy: float | None, ci: tuple[float, float] | None) -> str:
        return "" if accuracy is None else f"{accuracy:.1%} ({ci[0]:.1%}–{ci[1]:.1%})"

    names = {d.id: d.name for d in registry()}
    return [{"dimension": names.get(r["dimension_id"], str(r["dimension_id"])) if r["dimension_id"] is not None
             else "all dimensions", "solver": r["solver"],
             "chance": "" if r["chance"] is None else f"{r['chance']:.0%}",
             "questions before": r["n_before"], "accuracy before (95% CI)": cell(r["accuracy_before"], r["ci95_before"]),
             "questions after": r["n_after"], "accuracy after (95% CI)": cell(r["accuracy_after"], r["ci95_after"])}
            for r in report.solver_rows()]


ACCURACY_COLUMNS = ["dimension", "solver", "chance", "questions before", "accuracy before (95% CI)",
                    "questions after", "accuracy after (95% CI)"]


def report(store: Store) -> BlindReport:
    return report_from(store.get_verdicts(stage=STAGE, subject_kind="question"))
