"""The filter flow: the blind filter over every candidate question it has not judged yet."""

from __future__ import annotations

from functools import partial

from prefect import flow

from benchsmith.settings import Settings
from flows.tasks import new_run_id, run_sharded


def filter_stage(settings: Settings, run_id: str) -> dict:
    """The blind-filter task; callable inside any flow. With nothing pending it does not run at all (a
    rebuild that changed nothing runs no stage); otherwise its cache key includes the questions still
    pending, so questions a solver could not answer last time are retried."""
    from benchsmith import runner
    from benchsmith.store import Store
    from filters import blind

    config = blind.blind_settings(settings)
    with Store(settings.db_url) as store:
        pending = [q.id for q in blind.pending(store, config)]
        # what every shard learns from; the local runner's single task reads the candidates itself
        pool = [q.id for q in store.get_questions(status="candidate")] \
            if pending and settings.prefect.task_runner != "local" else []
        token = runner.cache_token(blind.BlindStage(config, ()), store)

    if not pending:  # nothing to judge: no task, no solver model loaded
        return blind.FilterRun().as_dict() | {"cached": True}

    judge = partial(blind_shard, settings=settings, pool=pool)
    return run_sharded(settings, run_id, "blind", judge, pending, reads=("questions",), sections=("filter",),
                       input_token=token)


def blind_shard(store, subjects: list[str] | None, *, settings: Settings, pool: list[str]) -> dict:
    """The blind filter over `subjects` (None: every pending candidate); a shard's learners fit on `pool`."""
    from filters import blind

    config = blind.blind_settings(settings)
    solvers = blind.solvers_from(config, settings=settings, store=store)
    return blind.apply(store, config, solvers, subjects=subjects, pool=None if subjects is None else pool).as_dict()


@flow(name="benchsmith-filter")
def filter_flow(settings: Settings) -> dict:
    return {"blind": filter_stage(settings, new_run_id())}
