"""Question reviews pulled back from Label Studio. Filled in by annotation/; the tasks they answer are
the lifecycle's (lifecycle.py)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from benchsmith.records import Review, utcnow
from benchsmith.store.schema import reviews
from benchsmith.store.sql import chunks, upsert


class ReviewsMixin:
    engine: sa.Engine

    def add_reviews(self, records: Sequence[Review]) -> int:
        """Store reviews; one edited in Label Studio since the last pull replaces its earlier version.
        Returns how many were not stored before."""
        rows = [r.model_dump() | {"id": r.id, "created_at": utcnow()} for r in records]
        with self.engine.begin() as conn:
            known = set()
            for batch in chunks([r["id"] for r in rows]):
                known.update(conn.scalars(sa.select(reviews.c.id).where(reviews.c.id.in_(batch))))
            upsert(conn, reviews, rows)
        return len({r["id"] for r in rows} - known)

    def get_reviews(self, question_ids: Sequence[str] | None = None) -> list[Review]:
        query = sa.select(reviews).order_by(reviews.c.question_id, reviews.c.annotation_id)
        with self.engine.connect() as conn:
            found = []
            if question_ids is None:
                found = list(conn.execute(query))
            else:
                for batch in chunks(list(question_ids)):
                    found.extend(conn.execute(query.where(reviews.c.question_id.in_(batch))))
        return [Review(**{k: v for k, v in r._mapping.items() if k not in ("id", "created_at")}) for r in found]
