"""The work ledger: which subjects each stage has finished under which configuration."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import sqlalchemy as sa

from benchsmith.records import utcnow
from benchsmith.store.schema import work_ledger
from benchsmith.store.sql import count_by, upsert


class LedgerMixin:
    engine: sa.Engine

    def finished_subjects(self, stage: str, config_key: str, *, retry_failed: bool = False) -> set[str]:
        """Subjects with a ledger row under this key; with `retry_failed`, only those that were done."""
        query = sa.select(work_ledger.c.subject).where(work_ledger.c.stage == stage,
                                                       work_ledger.c.config_key == config_key)
        if retry_failed:
            query = query.where(work_ledger.c.status == "done")
        with self.engine.connect() as conn:
            return set(conn.scalars(query))

    def record_work(self, stage: str, config_key: str, outcomes: Sequence[dict[str, Any]],
                    conn: sa.Connection | None = None) -> int:
        """Ledger rows for finished subjects (`subject`, `status`, `reason`, `details`); a subject recorded
        again under the same key (a failure tried again) gets its latest outcome. Returns how many rows
        were written."""
        now = utcnow()
        latest = {o["subject"]: o for o in outcomes}  # one row per subject: the database updates a key once a statement
        rows = [{"stage": stage, "config_key": config_key, "subject": o["subject"], "status": o["status"],
                 "reason": o.get("reason", ""), "details": o.get("details", {}), "created_at": now}
                for o in latest.values()]
        with nullcontext(conn) if conn is not None else self.engine.begin() as conn:
            upsert(conn, work_ledger, rows)
        return len(rows)

    def ledger_rows(self, stage: str, config_key: str | None = None) -> list[dict[str, Any]]:
        query = sa.select(work_ledger).where(work_ledger.c.stage == stage).order_by(work_ledger.c.subject)
        if config_key is not None:
            query = query.where(work_ledger.c.config_key == config_key)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def ledger_counts(self, stage: str) -> dict[tuple[str, str], int]:
        """(config key, status) -> subjects of `stage`."""
        c = work_ledger.c
        return count_by(self.engine, c.config_key, c.status, where=[c.stage == stage])

    def ledger_failures(self, stage: str) -> list[dict[str, Any]]:
        """The rows of `stage` that did not end done, by config key and subject."""
        query = (sa.select(work_ledger).where(work_ledger.c.stage == stage, work_ledger.c.status != "done")
                 .order_by(work_ledger.c.config_key, work_ledger.c.subject))
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

