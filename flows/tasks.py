"""How every stage becomes a Prefect task: cached on its inputs, retried, and timed in the store.

A stage task's inputs are the settings fingerprint, a token of the store's state, and whatever names
the stage's own input (a source's listing, say). Equal inputs mean the stage has nothing left to do,
so Prefect returns the stored result instead of running it; a changed store or setting runs it again.
The Settings object itself is left out of the key: its fingerprint stands for it, without secrets.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from prefect import task
from prefect.cache_policies import INPUTS

from benchsmith.settings import Settings
from benchsmith.store import Store

CACHE_POLICY = INPUTS - "settings" - "run_id"


def stage_task(name: str, settings: Settings, fn: Callable[..., dict]):
    """A Prefect task for one stage, with caching and the retries the settings ask for."""
    return task(fn, name=name, cache_policy=CACHE_POLICY, persist_result=True,
                retries=settings.prefect.retries, retry_delay_seconds=settings.prefect.retry_delay_seconds)


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def timed(store: Store, run_id: str, stage: str, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one stage, recording its duration, outcome and counters for the run report."""
    stage_run = store.start_stage(run_id, stage)
    try:
        stats = work()
    except BaseException as exc:
        store.finish_stage(stage_run, status="failed", stats={"error": f"{type(exc).__name__}: {exc}"})
        raise
    store.finish_stage(stage_run, status="done", stats=stats)
    return stats
