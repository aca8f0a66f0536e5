"""Reviews pulled back from Label Studio, of every kind of benchmark item, every version kept. Filled in by
annotation/; the tasks they answer are the lifecycle's (lifecycle.py)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from benchsmith.records import REVIEW_KINDS, ReviewVersion, aware, utcnow
from benchsmith.store.schema import reviews
from benchsmith.store.sql import insert_new, select_in

_COMMON = ("task_id", "annotation_id", "annotator", "keep", "reasons", "comment")  # what every kind's review says


class ReviewsMixin:
    engine: sa.Engine

    def add_reviews(self, records: Sequence[ReviewVersion]) -> int:
        """Store the review versions not seen before; return how many were new. Versions are never replaced."""
        now = utcnow()
        empty = {field: None for made in REVIEW_KINDS.values() for field in made.content_fields}  # one row shape
        rows = [{**empty, **r.model_dump(mode="json", include={*_COMMON, *r.content_fields}),
                 "submitted_at": r.submitted_at,
                 "id": r.id, "kind": r.kind, "subject_id": r.subject_id, "created_at": now} for r in records]
        with self.engine.begin() as conn:
            return len(insert_new(conn, reviews, rows))

    def get_reviews(self, subject_ids: Sequence[str] | None = None, *, kind: str = "question",
                    every_version: bool = False) -> list:
        """The reviews of items of `kind` (of those given), by item and annotation: each annotation's latest
        version, or with `every_version` all of them, oldest submission first."""
        made = REVIEW_KINDS[kind]
        query = sa.select(reviews).where(reviews.c.kind == kind).order_by(
            reviews.c.subject_id, reviews.c.annotation_id, reviews.c.submitted_at, reviews.c.created_at)
        with self.engine.connect() as conn:
            found = select_in(conn, query, reviews.c.subject_id, subject_ids)
        versions = [made(**{field: getattr(row, field) for field in (*_COMMON, *made.content_fields)
                            if getattr(row, field) is not None},
                         **{made.subject_field: row.subject_id},
                         submitted_at=aware(row.submitted_at))
                    for row in found]
        if every_version:
            return sorted(versions, key=lambda v: (v.subject_id, v.submitted_at, v.annotation_id))
        latest = {(v.subject_id, v.task_id, v.annotation_id): v for v in versions}  # the query's order: last wins
        return list(latest.values())
