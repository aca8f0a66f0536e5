"""How every stage becomes a Prefect task: skipped when its work ledger shows nothing pending, otherwise
keyed on the store's id and the runner's token (the stage, its config key and its pending subjects),
retried, timed in the store and, on dask or ray, sharded.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from typing import Any

from prefect import tags, task
from prefect.cache_policies import INPUTS

from benchsmith import runner
from benchsmith.errors import BenchsmithError
from benchsmith.secrets import scrub
from benchsmith.settings import Settings
from benchsmith.store import Store

ShardWork = Callable[[Store, "list[str] | None"], dict[str, Any]]


class StageFailed(BenchsmithError, RuntimeError):
    """A stage's error, restated without the secret its own message carried."""


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def timed(store: Store, run_id: str, stage: str, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one stage, recording its duration, outcome and counters for the run report."""
    stage_run = store.start_stage(run_id, stage)
    try:
        stats = work()
    except BaseException as exc:
        message = f"{type(exc).__name__}: {exc}"
        store.finish_stage(stage_run, status="failed", stats={"error": scrub(message)})
        if scrub(message) != message:  # Prefect persists a failed task's exception: never with a secret in it
            raise StageFailed(scrub(message)) from None
        raise
    store.finish_stage(stage_run, status="done", stats=stats)
    return stats


@dataclass
class Once(runner.Stage):
    """A runner stage with one subject, done once per config key: a release, the run report, a folder of
    scenes. `make(store)` does it and returns what the ledger keeps (a release's stats, the report's path)."""

    name: str
    subject_id: str | Callable[[], str]  # a callable is asked again after `make`: what it made is then on record
    key: str
    make: Callable[[Store], dict[str, Any]]

    def config_key(self) -> str:
        return self.key

    def units(self, _context: runner.StageContext) -> list[None]:
        return [None]

    def subject(self, _unit: None) -> str:
        return self.subject_id() if callable(self.subject_id) else self.subject_id

    def process(self, units: Sequence[None], context: runner.StageContext) -> Iterator[tuple[None, dict[str, Any]]]:
        yield from ((unit, self.make(context.store)) for unit in units)

    def commit(self, _context: runner.StageContext, pairs: list, _report: runner.StageReport) -> list[runner.Outcome]:
        return [runner.Outcome(self.subject(unit), "done", details=made) for unit, made in pairs]


def run_stage(settings: Settings, run_id: str, name: str, stage: runner.Stage, work: ShardWork | None = None, *,
              recorded: bool = False, retry_failed: bool = False, sharded: bool = False, tag: str = "",
              group: Callable[[str], str] | None = None) -> dict[str, Any]:
    """Run the runner stage `stage` as the Prefect task `name`, unless nothing is pending: then no task runs
    and the result is `{"cached": True}`. With `recorded` the result, run or not, is what the ledger keeps for
    the stage's one subject (a release's stats, the report's path).

    `work(store, subjects)` does the pending units (default: the runner runs the stage). A `sharded` stage's
    work is split over dask or ray workers (`run_sharded`); it is module-level, so workers unpickle it and
    build the stage themselves. `tag`: a Prefect tag for concurrency limits, `gpu` (a GPU per shard) or `openai`.
    """
    def recall(store: Store) -> dict[str, Any]:
        rows = store.ledger_rows(stage.name, stage.config_key()) if recorded else []
        return {k: v for row in rows for k, v in row["details"].items()}

    def run_here(store: Store, _subjects) -> dict[str, Any]:
        report = runner.run(stage, store, units=runner.pending(stage, store, retry_failed=retry_failed))
        return recall(store) if recorded else report.as_dict()

    with Store(settings.db_url) as store:
        pending = runner.pending(stage, store, retry_failed=retry_failed)
        if not pending:
            return recall(store) | {"cached": True}
        key = f"{store.store_id}:{runner.cache_token(stage, store, pending)}"
    with tags(tag) if tag else nullcontext():
        if sharded and settings.prefect.task_runner != "local":
            return run_sharded(settings, run_id, name, work, [stage.subject(u) for u in pending],
                               gpu=tag == "gpu", group=group)
        # Keyed, never read back: a task that ran with this token before left these units pending, to retry.
        return _shard.with_options(name=name, retries=settings.prefect.retries, refresh_cache=True,
                                   cache_policy=INPUTS - "settings" - "run_id" - "work", persist_result=True,
                                   retry_delay_seconds=settings.prefect.retry_delay_seconds)(
            name, settings, run_id, work or run_here, None, key)


def task_runner(settings: Settings):
    """The Prefect task runner `prefect.task_runner` names; None for `local` (the flow's default)."""
    options = settings.prefect
    if options.task_runner == "local":
        return None
    try:
        if options.task_runner == "dask":
            from prefect_dask import DaskTaskRunner
            if options.dask.address:
                return DaskTaskRunner(address=options.dask.address)
            return DaskTaskRunner(cluster_kwargs={"n_workers": options.dask.workers, "processes": True,
                                                  "threads_per_worker": options.dask.threads_per_worker})
        from prefect_ray import RayTaskRunner
        return RayTaskRunner(address=options.ray.address or None)
    except ImportError as exc:
        raise BenchsmithError(f"prefect.task_runner: {options.task_runner} needs "
                              f"pip install 'benchsmith[distributed]' ({exc.name} is missing)") from None


def on_task_runner(flow, settings: Settings):
    """`flow` on the task runner the settings name (unchanged for `local`)."""
    runner = task_runner(settings)
    return flow if runner is None else flow.with_options(task_runner=runner)


def shard_count(settings: Settings) -> int:
    """Shards per stage: `prefect.shards`, else two per thread of the Dask workers (those the scheduler at
    `prefect.dask.address` has now, or the LocalCluster's `workers` x `threads_per_worker`), 8 on Ray."""
    options = settings.prefect
    if options.shards:
        return options.shards
    if options.task_runner != "dask":
        return 8
    if not options.dask.address:
        return 2 * options.dask.workers * options.dask.threads_per_worker
    from distributed import Client

    with Client(options.dask.address, set_as_default=False, timeout=30) as client:
        return 2 * max(1, sum(client.nthreads().values()))


def run_shard(name: str, settings: Settings, run_id: str, work: ShardWork, subjects: list[str] | None,
              key: str = "") -> dict[str, Any]:
    """One shard of a stage (`subjects` None: the whole stage, keyed by `key`), in whichever process the
    engine chose."""
    with Store(settings.db_url) as store:
        return timed(store, run_id, name, lambda: work(store, subjects))


# Named apart from its function, so workers unpickle the function by reference to this module.
_shard = task(cache_policy=None)(run_shard)


def run_sharded(settings: Settings, run_id: str, name: str, work: ShardWork, subjects: Sequence[str], *,
                gpu: bool = False, group: Callable[[str], str] | None = None) -> dict[str, Any]:
    """`work` on dask or ray: `subjects` split into shards by a stable hash (`runner.shards`; of
    `group(subject)` when the subjects of a group must be worked on together), one Prefect task each on
    the flow's task runner, every shard with its own store connection; their stats are summed into one.

    A shard that runs twice (a retry, a lost worker) redoes only what its ledger rows do not show as
    finished, and its writes are keyed by content; paid LLM calls come from the call cache, under rate
    limits the store holds for all shards at once. `gpu` shards ask the engine for one GPU each (Dask
    resource `GPU`, Ray `num_gpus`)."""
    parts = runner.shards(subjects, shard_count(settings), group)
    staged = _shard.with_options(name=name, retries=settings.prefect.retries,
                                 retry_delay_seconds=settings.prefect.retry_delay_seconds)
    with ExitStack() as gpu_request:
        if gpu:
            gpu_request.enter_context(_gpu_resource(settings))
        futures = [staged.submit(f"{name}#{i}", settings, run_id, work, part) for i, part in enumerate(parts)]
    return merge_stats([future.result() for future in futures]) | {"shards": len(parts)}


def _gpu_resource(settings: Settings):
    if settings.prefect.task_runner == "dask":
        import dask
        return dask.annotate(resources={"GPU": 1})
    from prefect_ray.context import remote_options
    return remote_options(num_gpus=1)


def merge_stats(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Shard stats as one: numbers summed (seconds: the longest shard), dicts of counts merged."""
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if key == "seconds":
                out[key] = max(out.get(key, 0), value)
            elif isinstance(value, bool) or not isinstance(value, (int, float, dict)):
                out.setdefault(key, value)
            elif isinstance(value, dict):
                if all(isinstance(v, (int, float)) for v in value.values()):
                    merged = Counter(out.get(key, {}))
                    merged.update(value)  # unlike Counter + Counter, keeps the counts that are 0
                    out[key] = dict(merged)
                else:
                    out.setdefault(key, value)
            else:
                out[key] = out.get(key, 0) + value
    return out
