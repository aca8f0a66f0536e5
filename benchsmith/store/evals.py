"""Evaluation runs and their predictions. Filled in by the evaluation stage."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import sqlalchemy as sa

from benchsmith.records import utcnow
from benchsmith.store.schema import conversation_evals, eval_predictions, eval_runs
from benchsmith.store.sql import insert_new, select_in


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
        with nullcontext(conn) if conn is not None else self.engine.begin() as conn:
            return len(insert_new(conn, eval_predictions, rows))

    def predictions(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        return self._rows_of_runs(eval_predictions, run_ids)

    def add_conversation_evals(self, rows: Sequence[dict[str, Any]]) -> int:
        """ConvEval rows (one per conversation and setting of a run); one already there is kept."""
        now = utcnow()
        with self.engine.begin() as conn:
            return len(insert_new(conn, conversation_evals, [{**row, "created_at": now} for row in rows]))

    def conversation_evals(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        return self._rows_of_runs(conversation_evals, run_ids)

    def _rows_of_runs(self, table: sa.Table, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        query = sa.select(table).order_by(table.c.run_id, table.c.subject)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in select_in(conn, query, table.c.run_id, run_ids)]
