"""Facts, and what the work ledger says about extraction (stage `extract`, one config key per extractor)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from benchsmith.records import Fact, utcnow
from benchsmith.store.schema import facts
from benchsmith.store.sql import insert_new, select_in

EXTRACT_STAGE = "extract"


class FactsMixin:
    engine: sa.Engine

    def add_facts(self, extractor: str, found: Sequence[Fact]) -> int:
        """Write facts found by the extractor with key `extractor`; facts already stored are left alone.
        Returns how many were new."""
        with self.engine.begin() as conn:
            rows = [f.model_dump() | {"id": f.id, "extractor": extractor, "created_at": utcnow()} for f in found]
            return len(insert_new(conn, facts, rows))

    def get_facts(self, item_ids: Sequence[str], *, kinds: Sequence[str] | None = None) -> dict[str, list[Fact]]:
        out: dict[str, list[Fact]] = {i: [] for i in item_ids}
        query = sa.select(facts).order_by(facts.c.created_at, facts.c.id)
        if kinds:
            query = query.where(facts.c.kind.in_(list(kinds)))
        with self.engine.connect() as conn:
            for row in select_in(conn, query, facts.c.item_id, item_ids):
                out[row.item_id].append(Fact.model_validate(row, from_attributes=True))
        return out

    def extraction_counts(self) -> dict[tuple[str, str], int]:
        """(extractor key, status) -> images, from the work ledger."""
        return self.ledger_counts(EXTRACT_STAGE)

    def extraction_failures(self) -> list[dict]:
        """One dict per image an extractor failed on: item_id, extractor (its key), status, reason."""
        return [{"item_id": r["subject"], "extractor": r["config_key"], "status": r["status"], "reason": r["reason"],
                 **(r["details"] or {})} for r in self.ledger_failures(EXTRACT_STAGE)]
