"""Timings and counters per stage per run, for the run report."""

from __future__ import annotations

import sqlalchemy as sa

from benchsmith.records import utcnow
from benchsmith.store.schema import stage_runs


class RunsMixin:
    engine: sa.Engine

    def start_stage(self, run_id: str, stage: str) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(sa.insert(stage_runs).values(
                run_id=run_id, stage=stage, started_at=utcnow(), status="running", stats={}))
            return result.inserted_primary_key[0]

    def finish_stage(self, stage_run_id: int, *, status: str, stats: dict) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.update(stage_runs).where(stage_runs.c.id == stage_run_id).values(
                finished_at=utcnow(), status=status, stats=stats))

    def get_stage_runs(self, run_id: str | None = None) -> list[dict]:
        query = sa.select(stage_runs).order_by(stage_runs.c.id)
        if run_id:
            query = query.where(stage_runs.c.run_id == run_id)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]
