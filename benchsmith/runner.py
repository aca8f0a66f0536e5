"""One contract for every stage and one runner that drives it.

A stage says what is to be done and how one piece of it is done; the runner owns everything around
that: which subjects are still pending under the stage's configuration (the work ledger), `--limit`,
windows of work, committing results as they arrive, per-subject failure capture, progress, counters
and timing. The CLI commands and the Prefect flows both call `run`, so a stage is driven one way.

Every stage subclasses `Stage`, which declares each hook with its default. The runner hands each hook a
`StageContext` (the store); in a forked worker it is the same store, on connections of its own.

Results are written before their ledger rows, so a crash between the two only redoes work whose
outputs are idempotent (content-derived ids; paid LLM calls are answered from the call cache).

With `workers()` > 1 the pending units are split into that many shards (`shards`, by the stage's
`shard_group`); this process works on one and each other shard runs the same loop in a process forked
from it, committing to the store through its own connections. The workers' reports are summed into one.
"""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.connection
import time
import traceback
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from benchsmith.errors import BenchsmithError
from benchsmith.records import stable_hash


@dataclass(frozen=True)
class Outcome:
    subject: str
    status: Literal["done", "failed", "retry"]
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class StageReport:
    stage: str
    config_key: str
    pending: int = 0
    done: int = 0
    failed: int = 0
    retry_later: int = 0
    failures: Counter = field(default_factory=Counter)   # reason -> subjects (failed or left to retry)
    counters: Counter = field(default_factory=Counter)   # stage-specific counts: kept, dropped, tokens, ...
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "config_key": self.config_key, "pending": self.pending, "done": self.done,
                "failed": self.failed, "retry_later": self.retry_later, "failures": dict(self.failures),
                **dict(self.counters), "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class StageContext:
    """What the runner hands a stage's hooks."""

    store: Any


class Stage:
    """A stage of the runner. A subclass sets `name` (its work ledger's name, e.g. `generate:llm`) and
    defines `config_key`, `units`, `subject`, `process` and `commit`; the other hooks have defaults."""

    name: str

    @cached_property
    def label(self) -> str:
        """What progress calls it (a subclass may set another)."""
        return self.name

    def config_key(self) -> str:
        """A hash of exactly what changes its output (model, prompt text, rule, parameters), never batch
        sizes or devices (see `settings.keyed`): a changed key makes every subject pending again."""
        raise NotImplementedError

    def units(self, context: StageContext) -> Iterable[Any]:
        """All the work it could do now, done or not, in its order; it only reads."""
        raise NotImplementedError

    def subject(self, unit: Any) -> str:
        """A unit's name in the work ledger."""
        raise NotImplementedError

    def shard_group(self, subject: str) -> str:
        """Subjects of one group are never split between windows or shards, so the stage decides them
        together (an item's generate jobs); by default each subject is a group alone."""
        return subject

    def windows(self) -> tuple[int, int | None]:
        """Units handed to `process` at a time, and results committed together (None: a window's worth)."""
        return 64, None

    def workers(self) -> int:
        """Processes the runner may fork for it; 1: none."""
        return 1

    def prepare(self, context: StageContext, units: Sequence[Any]) -> None:
        """Once, here, before the pending `units` are processed or any worker is forked: build what every
        window reads (forked workers share it copy-on-write, so leave no threads or connections open)."""

    def process(self, units: Sequence[Any], context: StageContext) -> Iterator[tuple[Any, Any]]:
        """`(unit, result)` pairs in any order as results become ready: remote work (LLM calls) yields
        while other calls are still in flight, so commits never stall them."""
        raise NotImplementedError

    def commit(self, context: StageContext, pairs: list[tuple[Any, Any]], report: StageReport) -> list[Outcome]:
        """Write the results; one `Outcome` per pair: `done`, `failed` (final under this key, recorded with
        its reason) or `retry` (no record: the next run tries again, e.g. after an HTTP failure)."""
        raise NotImplementedError


# Called once, then dropped, when this process's run loop ends: work a stage's units leave for the end of the
# run registers here (an LLM client in batch mode submits the requests it queued).
AT_RUN_END: list[Callable[[], None]] = []

# Set while a command shows progress for stages it does not call itself (`build` runs them inside Prefect
# flows): given the stage's name and how many units it has to do, it returns advance(n).
progress_for: Callable[[str, int], Callable[[int], None]] | None = None


def config_key(*parts: Any) -> str:
    """The hash stages build their `config_key` from: pass exactly what changes the output."""
    return stable_hash(*parts)


# Errors that say something about the whole run (a missing key, an unreachable server, a full disk)
# stop it; anything else raised while processing is pinned on the subject that caused it.
RUN_ERRORS = (BenchsmithError, OSError, MemoryError)


def pending(stage: Stage, store, *, retry_failed: bool = False) -> list[Any]:
    """The units not finished under the stage's current config key, in the stage's order; with
    `retry_failed`, the ones that failed under it too."""
    finished = store.finished_subjects(stage.name, stage.config_key(), retry_failed=retry_failed)
    return [unit for unit in stage.units(StageContext(store)) if stage.subject(unit) not in finished]


def shards(subjects: Iterable[str], n: int, group: Callable[[str], str] | None = None) -> list[list[str]]:
    """`subjects` split into `n` shards by a stable hash of each (of `group(subject)` when given: subjects
    of one group stay together, in their order), so a subject lands in the same shard on every run and
    every machine; empty shards are left out."""
    out: list[list[str]] = [[] for _ in range(max(1, n))]
    for subject in subjects:
        out[int(stable_hash(group(subject) if group else subject)[:8], 16) % len(out)].append(subject)
    return [shard for shard in out if shard]


def cache_token(stage: Stage, store, units: Sequence[Any] | None = None) -> str:
    """Equal tokens mean the stage would do exactly the same work: the key for Prefect's cache. With
    nothing pending the token only depends on the config key, so an unchanged rebuild runs nothing.
    `units` are the pending units, when the caller has listed them already."""
    units = pending(stage, store) if units is None else units
    return stable_hash(stage.name, stage.config_key(), sorted(stage.subject(u) for u in units))


def run(stage: Stage, store, *, limit: int | None = None, units: Sequence[Any] | None = None,
        subjects: Collection[str] | None = None, progress: Callable[[int], None] | None = None,
        workers: int | None = None) -> StageReport:
    """Do every pending unit of `stage`, in the stage's `windows()`, results committed as they arrive.
    `units` are the pending units, when the caller has listed them already (failed ones included, to retry
    them: see `pending`); `subjects` keeps only those units (one shard of the stage: see `shards`).
    `workers` (default: the stage's `workers()`) > 1: that many processes, each over a shard of the units
    (see the module's docstring)."""
    started = time.perf_counter()
    key = stage.config_key()
    report = StageReport(stage.name, key)
    units = pending(stage, store) if units is None else list(units)
    if subjects is not None:
        wanted = set(subjects)
        units = [unit for unit in units if stage.subject(unit) in wanted]
    if limit is not None:
        units = units[:limit]
    report.pending = len(units)
    if progress is None and progress_for is not None and units:
        progress = progress_for(stage.label, len(units))
    context = StageContext(store)
    if units:
        stage.prepare(context, units)
    window, commit_every = stage.windows()
    workers = stage.workers() if workers is None else workers
    if workers > 1 and len(units) > window:
        _run_forked(stage, context, units, workers, window, commit_every or window, report, progress)
    else:
        _run_here(stage, context, units, window, commit_every or window, report, progress)
    report.seconds = time.perf_counter() - started
    return report


def windows(stage: Stage, units: list[Any], window: int) -> Iterator[list[Any]]:
    """`units` in runs of about `window`, never splitting a `shard_group` between two windows (a window
    then ends where its last group ends), so the group is worked on together."""
    group = stage.shard_group
    start = 0
    while start < len(units):
        end = min(start + window, len(units))
        last = group(stage.subject(units[end - 1]))
        while end < len(units) and group(stage.subject(units[end])) == last:
            end += 1
        yield units[start:end]
        start = end


def _run_here(stage: Stage, context: StageContext, units: list[Any], window: int, group: int, report: StageReport,
              progress: Callable[[int], None] | None) -> None:
    for batch in windows(stage, units, window):
        ready: list[tuple[Any, Any]] = []
        seen: set[str] = set()
        try:
            for pair in stage.process(batch, context):
                ready.append(pair)
                seen.add(stage.subject(pair[0]))
                if len(ready) >= group:
                    _commit(stage, context, ready, report, progress)
                    ready = []
        except Exception as exc:  # noqa: BLE001 - isolate the subject that broke the batch, keep the rest
            _commit(stage, context, ready, report, progress)
            if isinstance(exc, RUN_ERRORS):
                raise
            ready = [pair for unit in batch if stage.subject(unit) not in seen for pair in _one(stage, context, unit)]
        _commit(stage, context, ready, report, progress)
    while AT_RUN_END:  # what the run's work left to do once at its end (LLM requests queued for a batch job)
        AT_RUN_END.pop(0)()


class WorkerError(BenchsmithError, RuntimeError):
    """A worker process of a stage failed or died; the message carries its error."""


def _run_forked(stage: Stage, context: StageContext, units: list[Any], workers: int, window: int, group: int,
                report: StageReport, progress: Callable[[int], None] | None) -> None:
    by_subject = {stage.subject(u): u for u in units}
    parts = shards(by_subject, workers, stage.shard_group)
    if len(parts) < 2:
        _run_here(stage, context, units, window, group, report, progress)
        return
    gc.freeze()  # what the workers inherit stays shared: the collector never writes to it in them
    forking = multiprocessing.get_context("fork")
    waiting = {}
    for part in parts[1:]:  # this process works on the first shard itself: one copy less of what it holds
        receive, send = forking.Pipe(duplex=False)
        worker = forking.Process(target=_worker, args=(stage, context, [by_subject[s] for s in part], window,
                                                       group, report.config_key, send), daemon=True)
        worker.start()
        send.close()
        waiting[receive] = worker
    errors: list[str] = []

    def hear(timeout: float | None) -> None:
        """Pass the workers' progress on; take the reports of those that finished."""
        for receive in multiprocessing.connection.wait(list(waiting), timeout):
            try:
                kind, value = receive.recv()
            except EOFError:
                worker = waiting.pop(receive)
                worker.join()
                errors.append(f"a worker process ended without a report (exit code {worker.exitcode})")
                continue
            if kind == "progress":
                if progress:
                    progress(value)
                continue
            waiting.pop(receive).join()
            if kind == "error":
                errors.append(value)
            else:
                _add(report, value)

    def here(n: int) -> None:
        if progress:
            progress(n)
        hear(0)

    failed_here = None
    try:
        _run_here(stage, context, [by_subject[s] for s in parts[0]], window, group, report, here)
    except RUN_ERRORS as exc:  # the workers' shards still finish and are stored
        failed_here = exc
    while waiting:
        hear(None)
    gc.unfreeze()
    if failed_here is not None:
        raise failed_here
    if errors:
        raise WorkerError(f"{len(errors)} of {len(parts)} worker processes of {report.stage} failed; what each "
                          f"finished is stored, a rerun does the rest. First: {errors[0]}")


def _worker(stage: Stage, context: StageContext, units: list[Any], window: int, group: int, config_key: str, send) -> None:
    """One shard, in a forked process: the same loop, through connections of its own."""
    context.store.engine.dispose(close=False)  # the parent's pooled connections stay the parent's
    report = StageReport(stage.name, config_key)
    try:
        _run_here(stage, context, units, window, group, report, lambda n: send.send(("progress", n)))
    except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent, which raises it
        send.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-3)}"))
    else:
        send.send(("done", report))
    finally:
        send.close()


def _add(report: StageReport, part: StageReport) -> None:
    report.done += part.done
    report.failed += part.failed
    report.retry_later += part.retry_later
    report.failures.update(part.failures)
    report.counters.update(part.counters)


@dataclass(frozen=True)
class _Crashed:
    reason: str


def _one(stage: Stage, context: StageContext, unit: Any) -> list[tuple[Any, Any]]:
    """`unit` processed alone; an exception becomes its result, recorded as its failure."""
    try:
        return list(stage.process([unit], context))
    except RUN_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001
        return [(unit, _Crashed(f"{type(exc).__name__}: {exc}".splitlines()[0][:500]))]


def _commit(stage: Stage, context: StageContext, pairs: list[tuple[Any, Any]], report: StageReport,
            progress: Callable[[int], None] | None) -> None:
    if not pairs:
        return
    good = [(u, r) for u, r in pairs if not isinstance(r, _Crashed)]
    outcomes = stage.commit(context, good, report) if good else []
    outcomes += [Outcome(stage.subject(u), "failed", r.reason) for u, r in pairs if isinstance(r, _Crashed)]
    for outcome in outcomes:
        if outcome.status == "done":
            report.done += 1
            continue
        if outcome.status == "retry":
            report.retry_later += 1
        else:
            report.failed += 1
        report.failures[outcome.reason] += 1
    context.store.record_work(stage.name, report.config_key,
                      [{"subject": o.subject, "status": o.status, "reason": o.reason, "details": o.details}
                       for o in outcomes if o.status != "retry"])
    if progress:
        progress(len(pairs))
