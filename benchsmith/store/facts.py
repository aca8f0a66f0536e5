"""Facts and the record of which extractor has run on which item."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from benchsmith.records import Fact, utcnow
from benchsmith.store.schema import extractions, facts, items
from benchsmith.store.sql import chunks, insert_new, upsert


def _fact_row(fact: Fact, extractor: str) -> dict:
    return {
        "id": fact.id, "item_id": fact.item_id, "extractor": extractor, "kind": fact.kind, "text": fact.text,
        "box": list(fact.box) if fact.box else None,
        "quad": [list(p) for p in fact.quad] if fact.quad else None,
        "score": fact.score, "attributes": fact.attributes, "provenance": fact.provenance.model_dump(),
        "created_at": utcnow(),
    }


def _fact_from_row(row) -> Fact:
    return Fact(item_id=row.item_id, kind=row.kind, text=row.text, box=row.box, quad=row.quad,
                score=row.score, attributes=row.attributes, provenance=row.provenance)


class FactsMixin:
    engine: sa.Engine

    def items_without_extraction(self, extractor: str, *, kind: str = "image",
                                 retry_failed: bool = False) -> list[str]:
        """Ids of usable items this extractor has not yet run on (failed ones too, if asked)."""
        done = sa.select(extractions.c.item_id).where(
            extractions.c.extractor == extractor, extractions.c.item_id == items.c.id)
        if retry_failed:
            done = done.where(extractions.c.status == "done")
        query = (sa.select(items.c.id).where(items.c.kind == kind, items.c.status == "ok", ~sa.exists(done))
                 .order_by(items.c.created_at, items.c.id))
        with self.engine.connect() as conn:
            return list(conn.scalars(query))

    def record_extraction(self, item_id: str, extractor: str, found: Sequence[Fact], *,
                          status: str = "done", reason: str = "", seconds: float = 0.0) -> None:
        """Write one item's facts and mark the extractor as run on it, in one transaction."""
        with self.engine.begin() as conn:
            insert_new(conn, facts, [_fact_row(f, extractor) for f in found])
            upsert(conn, extractions, [{
                "item_id": item_id, "extractor": extractor, "status": status, "reason": reason,
                "n_facts": len(found), "seconds": seconds, "created_at": utcnow()}])

    def get_facts(self, item_ids: Sequence[str], *, kinds: Sequence[str] | None = None) -> dict[str, list[Fact]]:
        out: dict[str, list[Fact]] = {i: [] for i in item_ids}
        with self.engine.connect() as conn:
            for batch in chunks(list(item_ids)):
                query = sa.select(facts).where(facts.c.item_id.in_(batch)).order_by(facts.c.created_at, facts.c.id)
                if kinds:
                    query = query.where(facts.c.kind.in_(list(kinds)))
                for row in conn.execute(query):
                    out[row.item_id].append(_fact_from_row(row))
        return out

    def extraction_counts(self) -> dict[tuple[str, str], int]:
        """(extractor, status) -> count."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(extractions.c.extractor, extractions.c.status, sa.func.count())
                                .group_by(extractions.c.extractor, extractions.c.status))
            return {(e, s): n for e, s, n in rows}

    def extraction_failures(self) -> list[dict]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(extractions).where(extractions.c.status != "done"))
            return [dict(r._mapping) for r in rows]
