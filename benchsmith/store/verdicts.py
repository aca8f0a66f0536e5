"""Verdicts: the recorded outcome of every check, passed or not."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext

import sqlalchemy as sa

from benchsmith.records import GATE_STAGE, Verdict, utcnow
from benchsmith.store.lifecycle import TABLES, refuse_contradictions
from benchsmith.store.schema import verdicts
from benchsmith.store.sql import count_by, select_in, upsert


class VerdictsMixin:
    engine: sa.Engine

    def add_verdicts(self, records: Sequence[Verdict], conn: sa.Connection | None = None) -> None:
        """Record verdicts; a check made again on the same subject replaces its earlier outcome. A failed
        quality-gate verdict on an item that is not dropped is refused (`ContradictionError`), with nothing
        of the transaction written."""
        rows = [r.model_dump() | {"id": r.id, "created_at": utcnow()} for r in records]
        with nullcontext(conn) if conn is not None else self.engine.begin() as conn:
            upsert(conn, verdicts, rows)
            failed = [r for r in records if r.stage == GATE_STAGE and not r.passed]
            if failed:
                refuse_contradictions(conn, [r.subject_id for r in failed],
                                      sorted({r.subject_kind for r in failed} & set(TABLES)))

    def get_verdicts(self, *, stage: str | None = None, passed: bool | None = None,
                     subject_kind: str | None = None, subject_id: str | None = None,
                     subject_ids: Sequence[str] | None = None) -> list[Verdict]:
        """Verdicts, oldest first (with `subject_ids`: oldest first for each subject), of these only."""
        query = sa.select(verdicts).order_by(verdicts.c.created_at)
        for col, value in (("stage", stage), ("passed", passed), ("subject_kind", subject_kind),
                           ("subject_id", subject_id)):
            if value is not None:
                query = query.where(verdicts.c[col] == value)
        with self.engine.connect() as conn:
            rows = conn.execute(query) if subject_ids is None else select_in(conn, query, verdicts.c.subject_id,
                                                                             subject_ids)
            return [Verdict.model_validate(r, from_attributes=True) for r in rows]

    def verdict_counts(self, stage: str | None = None) -> dict[tuple[str, str, bool, str], int]:
        """(stage, rule, passed, reason) -> count."""
        c = verdicts.c
        return count_by(self.engine, c.stage, c.rule, c.passed, c.reason, where=[c.stage == stage] if stage else [])
