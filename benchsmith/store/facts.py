"""Facts, and what the work ledger says about extraction (stage `extract`, one config key per extractor)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from benchsmith.records import Fact, utcnow
from benchsmith.store.schema import facts
from benchsmith.store.sql import insert_new, select_in

EXTRACT_STAGE = "extract"


def _current(rows: list) -> list:
    """Of one item's fact rows (oldest first), those whose extractor key is the latest of its backend and
    model: `backend:model:hash` keys share `backend:model`; any other key stands alone."""
    latest: dict[str, str] = {}
    for row in rows:
        latest[_extractor_of(row.extractor)] = row.extractor  # rows come oldest first: the last one wins
    return [row for row in rows if latest[_extractor_of(row.extractor)] == row.extractor]


def _extractor_of(key: str) -> str:
    head, _, settings_hash = key.rpartition(":")
    return head if head.count(":") >= 1 and len(settings_hash) == 8 else key


class FactsMixin:
    engine: sa.Engine

    def add_facts(self, extractor: str, found: Sequence[Fact]) -> int:
        """Write facts found by the extractor with key `extractor`; facts already stored are left alone.
        Returns how many were new."""
        with self.engine.begin() as conn:
            rows = [f.model_dump() | {"id": f.id, "extractor": extractor, "created_at": utcnow()} for f in found]
            return len(insert_new(conn, facts, rows))

    def get_facts(self, item_ids: Sequence[str], *, kinds: Sequence[str] | None = None) -> dict[str, list[Fact]]:
        """The facts of each item, of `kinds` (None: all). An extractor whose settings changed writes under
        a new key (`backend:model:settings-hash`); of the keys of one backend and model, only the facts of
        the one that last wrote facts for the item are current, so facts from its old settings are left out."""
        rows: dict[str, list] = {i: [] for i in item_ids}
        query = sa.select(facts).order_by(facts.c.created_at, facts.c.id)
        if kinds:
            query = query.where(facts.c.kind.in_(list(kinds)))
        with self.engine.connect() as conn:
            for row in select_in(conn, query, facts.c.item_id, item_ids):
                rows[row.item_id].append(row)
        return {item_id: [Fact.model_validate(row, from_attributes=True) for row in _current(found)]
                for item_id, found in rows.items()}

    def extraction_counts(self) -> dict[tuple[str, str], int]:
        """(extractor key, status) -> images, from the work ledger."""
        return self.ledger_counts(EXTRACT_STAGE)

    def extraction_failures(self) -> list[dict]:
        """One dict per image an extractor failed on: item_id, extractor (its key), status, reason."""
        return [{"item_id": r["subject"], "extractor": r["config_key"], "status": r["status"], "reason": r["reason"],
                 **(r["details"] or {})} for r in self.ledger_failures(EXTRACT_STAGE)]
