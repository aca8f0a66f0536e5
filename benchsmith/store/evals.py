"""Evaluation runs and their predictions. Filled in by the evaluation stage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from benchsmith.records import utcnow
from benchsmith.store.schema import conversation_evals, eval_predictions, eval_runs
from benchsmith.store.sql import chunks, insert_new


class EvalsMixin:
    engine: sa.Engine

    def add_eval_run(self, run: dict[str, Any]) -> None:
        """Record a run (`id`, `model`, `adapter`, `source`, `protocol`, `config`) unless it is there."""
        with self.engine.begin() as conn:
            insert_new(conn, eval_runs, [{**run, "created_at": utcnow()}])

    def eval_runs(self, source: str | None = None) -> list[dict[str, Any]]:
        query = sa.select(eval_runs).order_by(eval_runs.c.created_at, eval_runs.c.id)
        if source is not None:
            query = query.where(eval_runs.c.source == source)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def add_predictions(self, rows: Sequence[dict[str, Any]], conn: sa.Connection | None = None) -> int:
        """Prediction rows; one already there for its run and subject is kept as it was."""
        now = utcnow()
        rows = [{**row, "created_at": now} for row in rows]
        if conn is not None:
            return len(insert_new(conn, eval_predictions, rows))
        with self.engine.begin() as own:
            return len(insert_new(own, eval_predictions, rows))

    def predictions(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        with self.engine.connect() as conn:
            for batch in chunks(list(run_ids)):
                query = sa.select(eval_predictions).where(eval_predictions.c.run_id.in_(batch)).order_by(
                    eval_predictions.c.run_id, eval_predictions.c.subject)
                out.extend(dict(r._mapping) for r in conn.execute(query))
        return out

    def add_conversation_evals(self, rows: Sequence[dict[str, Any]]) -> int:
        """ConvEval rows (one per conversation and setting of a run); one already there is kept."""
        now = utcnow()
        with self.engine.begin() as conn:
            return len(insert_new(conn, conversation_evals, [{**row, "created_at": now} for row in rows]))

    def conversation_evals(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        with self.engine.connect() as conn:
            for batch in chunks(list(run_ids)):
                query = sa.select(conversation_evals).where(conversation_evals.c.run_id.in_(batch)).order_by(
                    conversation_evals.c.run_id, conversation_evals.c.subject)
                out.extend(dict(r._mapping) for r in conn.execute(query))
        return out
