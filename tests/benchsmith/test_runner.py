"""The stage runner: the work ledger decides what is pending, results are committed as they arrive,
one bad subject fails alone, and a run-level error stops the run with what was done kept."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest

from benchsmith import runner
from benchsmith.errors import BenchsmithError
from benchsmith.records import Verdict
from benchsmith.runner import Outcome


@dataclass
class Squares(runner.Stage):
    """A stage over the numbers 0..n-1 that records each square as a verdict."""

    n: int = 6
    power: int = 2
    broken: set[int] = field(default_factory=set)        # raise while processing these
    flaky: set[int] = field(default_factory=set)         # ask to be retried
    stop_after: int | None = None                        # raise a run-level error after this many results
    processed: list[int] = field(default_factory=list)
    window: int = 64
    commit_every: int | None = None
    name: str = "squares"

    def config_key(self) -> str:
        return runner.config_key("squares", self.power)

    def units(self, context):
        return list(range(self.n))

    def subject(self, unit: int) -> str:
        return f"n{unit}"

    def windows(self):
        return self.window, self.commit_every

    def process(self, units, context):
        for unit in units:
            if self.stop_after is not None and len(self.processed) >= self.stop_after:
                raise BenchsmithError("the server went away")
            if unit in self.broken:
                raise ValueError(f"cannot square {unit}")
            self.processed.append(unit)
            yield unit, unit ** self.power

    def commit(self, context, pairs, report):
        context.store.add_verdicts([Verdict(subject_id=f"n{u}", subject_kind="item", stage="squares", rule="power",
                                    passed=True, details={"value": r, "pid": os.getpid()}) for u, r in pairs])
        report.counters["written"] += len(pairs)
        return [Outcome(self.subject(u), "retry" if u in self.flaky else "done", "flaky" if u in self.flaky else "")
                for u, _ in pairs]


def test_a_rerun_does_nothing_and_a_new_config_key_redoes_everything(store):
    stage = Squares(window=4)
    first = runner.run(stage, store)
    assert (first.pending, first.done, first.counters["written"]) == (6, 6, 6)
    again = Squares()
    assert runner.run(again, store).pending == 0 and again.processed == []
    cubes = Squares(power=3)
    assert runner.run(cubes, store).done == 6 and cubes.processed == list(range(6))
    assert {r["config_key"] for r in store.ledger_rows("squares")} == {stage.config_key(), cubes.config_key()}


def test_one_bad_subject_fails_alone_with_its_reason_and_is_not_retried(store):
    report = runner.run(Squares(broken={3}, window=4), store)
    assert (report.done, report.failed) == (5, 1)
    assert report.failures == {"ValueError: cannot square 3": 1}
    [failed] = [r for r in store.ledger_rows("squares") if r["status"] == "failed"]
    assert failed["subject"] == "n3" and failed["reason"] == "ValueError: cannot square 3"
    assert runner.run(Squares(), store).pending == 0  # a failure is final under this key


def test_retry_outcomes_leave_no_record_and_come_back(store):
    report = runner.run(Squares(flaky={1, 4}), store)
    assert (report.done, report.retry_later) == (4, 2)
    rerun = Squares()
    assert runner.run(rerun, store).done == 2 and rerun.processed == [1, 4]


def test_a_run_level_error_stops_the_run_and_keeps_what_was_committed(store):
    stage = Squares(n=10, stop_after=5, window=10, commit_every=2)
    with pytest.raises(BenchsmithError, match="went away"):
        runner.run(stage, store)
    assert {r["subject"] for r in store.ledger_rows("squares")} == {f"n{i}" for i in range(5)}
    rest = Squares(n=10)
    runner.run(rest, store)
    assert rest.processed == [5, 6, 7, 8, 9]


def test_limit_progress_and_the_cache_token(store):
    seen = []
    stage = Squares()
    token_before = runner.cache_token(stage, store)
    assert runner.run(stage, store, limit=2, progress=seen.append).done == 2 and sum(seen) == 2
    assert runner.cache_token(stage, store) != token_before     # less is pending now
    runner.run(stage, store)
    done = runner.cache_token(stage, store)
    assert runner.cache_token(Squares(), store) == done          # nothing pending: stable
    assert runner.cache_token(Squares(power=3), store) != done   # another config: work again


def test_shards_split_subjects_by_a_stable_hash_and_cover_each_once():
    subjects = [f"item-{i}" for i in range(200)]
    parts = runner.shards(subjects, 4)
    assert sorted(s for part in parts for s in part) == sorted(subjects) and len(parts) == 4
    assert runner.shards(list(reversed(subjects)), 4) == [list(reversed(p)) for p in parts]  # order-free
    assert runner.shards(subjects[:1], 4) == [["item-0"]]  # empty shards are left out


def test_shards_keep_a_groups_subjects_together_in_their_order():
    subjects = [f"item-{i}:{dimension}" for i in range(50) for dimension in ("count", "colour", "place")]
    parts = runner.shards(subjects, 4, group=lambda subject: subject.split(":")[0])
    assert len(parts) == 4 and sorted(s for part in parts for s in part) == sorted(subjects)
    for part in parts:
        for item in {s.split(":")[0] for s in part}:
            assert [s for s in part if s.startswith(f"{item}:")] == [f"{item}:{d}" for d in ("count", "colour", "place")]


def test_shards_run_apart_do_the_stage_once_and_a_rerun_shard_adds_nothing(store):
    parts = runner.shards([f"n{i}" for i in range(12)], 3)
    reports = [runner.run(Squares(n=12), store, subjects=part) for part in parts]
    assert sum(r.done for r in reports) == 12 and [r.pending for r in reports] == [len(p) for p in parts]
    again = Squares(n=12)
    assert runner.run(again, store, subjects=parts[0]).pending == 0 and again.processed == []
    assert len(store.ledger_rows("squares")) == 12


class Minimal(runner.Stage):
    """Only what a stage must say: the hooks with defaults are left alone."""

    name = "minimal"

    def config_key(self):
        return "v1"

    def units(self, context):
        return ["a", "b", "c"]

    def subject(self, unit):
        return unit

    def process(self, units, context):
        return ((unit, unit.upper()) for unit in units)

    def commit(self, context, pairs, report):
        return [Outcome(unit, "done", details={"upper": upper}) for unit, upper in pairs]


def test_a_stage_with_only_the_required_members_runs_on_the_defaults(store):
    report = runner.run(Minimal(), store)
    assert (report.pending, report.done) == (3, 3)
    assert {r["subject"]: r["details"]["upper"] for r in store.ledger_rows("minimal")} == {"a": "A", "b": "B", "c": "C"}
    assert runner.run(Minimal(), store).pending == 0


@dataclass
class OffsetSquares(Squares):
    """Squares plus an offset that only `prepare` sets: the windows, and the workers, see what it readied."""

    offset: int | None = None
    readied: list[int] = field(default_factory=list)   # how many units each `prepare` was given

    def prepare(self, context, units):
        assert self.processed == [], "prepared after processing began"
        self.readied.append(len(units))
        self.offset = 1000

    def process(self, units, context):
        for unit, square in super().process(units, context):
            yield unit, square + self.offset


def test_prepare_is_called_once_before_processing_and_not_when_nothing_is_pending(store):
    stage = OffsetSquares(n=10, window=3)
    assert runner.run(stage, store).done == 10 and stage.readied == [10]
    assert {v.details["value"] for v in store.get_verdicts(stage="squares")} == {i * i + 1000 for i in range(10)}
    again = OffsetSquares(n=10)
    assert runner.run(again, store).pending == 0 and again.readied == []


def test_workers_share_the_units_in_processes_of_their_own_and_their_reports_add_up(store):
    stage, seen = OffsetSquares(n=40, window=4), []
    report = runner.run(stage, store, workers=2, progress=seen.append)
    assert (report.pending, report.done, report.counters["written"], sum(seen)) == (40, 40, 40, 40)
    assert stage.readied == [40] and 0 < len(stage.processed) < 40  # readied here once, one shard worked on here
    found = {v.subject_id: v.details for v in store.get_verdicts(stage="squares")}
    assert {s: d["value"] for s, d in found.items()} == {f"n{i}": i * i + 1000 for i in range(40)}
    assert len({d["pid"] for d in found.values()}) == 2 and os.getpid() in {d["pid"] for d in found.values()}
    assert runner.run(Squares(n=40), store, workers=2).pending == 0


@dataclass
class BreaksInWorkers(Squares):
    """Squares whose server goes away in every process but the one that started the run."""

    home: int = field(default_factory=os.getpid)

    def process(self, units, context):
        if os.getpid() != self.home:
            self.stop_after = 3
        yield from super().process(units, context)


def test_a_failing_worker_fails_the_run_once_the_others_are_done_and_a_rerun_finishes(store):
    with pytest.raises(runner.WorkerError, match="1 of 2 worker processes of squares failed.*went away"):
        runner.run(BreaksInWorkers(n=40, window=2), store, workers=2)
    kept = {r["subject"] for r in store.ledger_rows("squares")}
    here = set(runner.shards([f"n{i}" for i in range(40)], 2)[0])
    assert here < kept and len(kept - here) == 3  # this process's shard whole, the worker's first three
    rest = Squares(n=40)
    assert runner.run(rest, store).done == 40 - len(kept) and {f"n{i}" for i in rest.processed}.isdisjoint(kept)


def test_a_run_level_error_here_waits_for_the_workers_and_is_raised(store):
    with pytest.raises(BenchsmithError, match="went away") as raised:
        runner.run(Squares(n=40, stop_after=3, window=2), store, workers=2)
    assert not isinstance(raised.value, runner.WorkerError)
    assert len(store.ledger_rows("squares")) == 6  # three a process, each stored before the run ended


def test_one_worker_or_too_few_units_run_here(store):
    stage = OffsetSquares(n=3, window=4)
    assert runner.run(stage, store, workers=2).done == 3
    assert stage.processed == [0, 1, 2]
    assert {v.details["pid"] for v in store.get_verdicts(stage="squares")} == {os.getpid()}
