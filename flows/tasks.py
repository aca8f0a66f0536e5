"""How every stage becomes a Prefect task: cached on its inputs, retried, and timed in the store.

A stage's cache key is the settings fingerprint, the store's id, a token of the tables the stage reads
(their row counts and newest rows), and anything else that names its input (a source's file listing,
say). Equal keys mean the stage's inputs have not changed since it last finished, so Prefect returns the
stored result without running it. The Settings object, the run id and the work function are left out of
the key: the fingerprint stands for the settings, without secrets.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from prefect import task
from prefect.cache_policies import INPUTS

from benchsmith.errors import BenchsmithError
from benchsmith.secrets import scrub
from benchsmith.settings import Settings
from benchsmith.store import Store

StageWork = Callable[[Store], dict[str, Any]]


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
