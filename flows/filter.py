"""The filter flow: the blind filter over every candidate question it has not judged yet."""

from __future__ import annotations

from functools import partial

from prefect import flow

from benchsmith.settings import Settings
from flows.tasks import new_run_id, run_stage


def filter_stage(settings: Settings, run_id: str) -> dict:
    """The blind-filter stage; callable inside any flow. Questions a solver could not answer stay pending,
    so the next run tries them again."""
    from filters import blind

    config = blind.blind_settings(settings)
    return run_stage(settings, run_id, "blind", blind.BlindStage(config, ()),
                     partial(blind_shard, settings=settings), sharded=True)


def blind_shard(store, subjects: list[str] | None, *, settings: Settings) -> dict:
    """The blind filter over `subjects` (None: every pending candidate). Every shard's learners fit on the
    same pool (the questions past the quality gate), whatever its siblings drop meanwhile."""
    from filters import blind

    config = blind.blind_settings(settings)
    solvers = blind.solvers_from(config, settings=settings, store=store)
    return blind.counts(blind.apply(store, config, solvers, subjects=subjects))


@flow(name="benchsmith-filter")
def filter_flow(settings: Settings) -> dict:
    return {"blind": filter_stage(settings, new_run_id())}
