"""How every stage becomes a Prefect task: cached on its inputs, retried, and timed in the store.

A stage's cache key is the settings fingerprint, the store's id, a token of the tables the stage reads
(their row counts and newest rows), and anything else that names its input (a source's file listing,
say). Equal keys mean the stage's inputs have not changed since it last finished, so Prefect returns the
stored result without running it. The Settings object, the run id and the work function are left out of
the key: the fingerprint stands for the settings, without secrets.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from prefect import task
from prefect.cache_policies import INPUTS

from benchsmith.errors import BenchsmithError
from benchsmith.secrets import scrub
from benchsmith.settings import Settings
from benchsmith.store import Store

StageWork = Callable[[Store], dict[str, Any]]
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


@task(cache_policy=INPUTS - "settings" - "run_id" - "work", persist_result=True)
def _stage(name: str, key: dict[str, str], settings: Settings, run_id: str, work: StageWork) -> dict[str, Any]:
    with Store(settings.db_url) as store:
        return timed(store, run_id, name, lambda: work(store))


def run_stage(settings: Settings, run_id: str, name: str, work: StageWork, *, reads: Sequence[str],
              sections: Sequence[str] | None, input_token: str = "") -> dict[str, Any]:
    """Run `work(store)` as the Prefect task `name`, unless its inputs are unchanged since it last ran;
    then its stored result comes back marked `"cached": True`.

    `reads` names the store tables the stage takes its input from, `sections` the settings sections it
    reads (None: all of them); `input_token` covers inputs from outside the store.
    """
    with Store(settings.db_url) as store:
        key = {"settings": settings.fingerprint(sections), "state": store.state_token(reads), "input": input_token}
    staged = _stage.with_options(name=name, retries=settings.prefect.retries,
                                 retry_delay_seconds=settings.prefect.retry_delay_seconds)
    state = staged(name, key, settings, run_id, work, return_state=True)
    result = state.result()
    return result | {"cached": True} if state.name == "Cached" else result


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


def run_shard(name: str, settings: Settings, run_id: str, work: ShardWork, subjects: list[str]) -> dict[str, Any]:
    """One shard of a stage, in whichever worker process the engine chose."""
    with Store(settings.db_url) as store:
        return timed(store, run_id, name, lambda: work(store, subjects))


# Named apart from its function, so workers unpickle the function by reference to this module.
_shard = task(cache_policy=None)(run_shard)


def run_sharded(settings: Settings, run_id: str, name: str, work: ShardWork, subjects: Sequence[str], *,
                reads: Sequence[str], sections: Sequence[str] | None, input_token: str = "",
                gpu: bool = False, group: Callable[[str], str] | None = None) -> dict[str, Any]:
    """A heavy stage: with the local runner exactly `run_stage(work(store, None))`; on dask or ray its
    pending `subjects` split into shards by a stable hash (`runner.shards`; of `group(subject)` when the
    subjects of a group must be worked on together), one Prefect task each on the flow's task runner,
    every shard with its own store connection; their stats are summed into one.

    A shard that runs twice (a retry, a lost worker) redoes only what its ledger rows do not show as
    finished, and its writes are keyed by content; paid LLM calls come from the call cache, under rate
    limits the store holds for all shards at once. `gpu` shards ask the engine for one GPU each (Dask
    resource `GPU`, Ray `num_gpus`)."""
    if settings.prefect.task_runner == "local":
        return run_stage(settings, run_id, name, lambda store: work(store, None), reads=reads, sections=sections,
                         input_token=input_token)
    from benchsmith import runner

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
