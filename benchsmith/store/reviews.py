"""Review tasks pushed to Label Studio and the reviews pulled back. Filled in by annotation/.

A review task row is written before its question is sent (task_id still empty) and completed with the
server's task id after: a push that dies in between leaves a row that says "ask the server first".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlalchemy as sa

from benchsmith.records import Review, utcnow
from benchsmith.store.schema import review_tasks, reviews
from benchsmith.store.sql import chunks, upsert


class ReviewsMixin:
    engine: sa.Engine

    def record_review_intents(self, question_ids: Sequence[str], project_id: int, round: str = "") -> None:
        """Note that these questions, none of which has a confirmed task in `round`, are about to be sent
        to `project_id`. Round "" is the first review; a second look names the release it rechecks."""
        now = utcnow()
        with self.engine.begin() as conn:
            upsert(conn, review_tasks, [{"question_id": qid, "round": round, "project_id": project_id,
                                         "task_id": None, "pushed_at": now} for qid in question_ids])

    def set_review_task_ids(self, task_ids: Mapping[str, int], round: str = "") -> None:
        """Record the server's task id of each question in `round` (question id -> task id)."""
        if not task_ids:
            return
        with self.engine.begin() as conn:
            conn.execute(sa.update(review_tasks).where(review_tasks.c.question_id == sa.bindparam("qid"),
                                                       review_tasks.c.round == round)
                         .values(task_id=sa.bindparam("tid")),
                         [{"qid": qid, "tid": tid} for qid, tid in task_ids.items()])

    def get_review_tasks(self, question_ids: Sequence[str] | None = None,
                         round: str = "") -> dict[str, tuple[int, int | None]]:
        """question id -> (project id, task id or None while the push is unconfirmed), in `round`."""
        query = (sa.select(review_tasks.c.question_id, review_tasks.c.project_id, review_tasks.c.task_id)
                 .where(review_tasks.c.round == round))
        with self.engine.connect() as conn:
            if question_ids is None:
                return {q: (p, t) for q, p, t in conn.execute(query)}
            out = {}
            for batch in chunks(list(question_ids)):
                out.update({q: (p, t) for q, p, t in conn.execute(
                    query.where(review_tasks.c.question_id.in_(batch)))})
            return out

    def get_second_look_tasks(self) -> dict[tuple[str, str], tuple[int, int | None]]:
        """(question id, round) -> (project id, task id or None) for every round after the first."""
        query = sa.select(review_tasks.c.question_id, review_tasks.c.round, review_tasks.c.project_id,
                          review_tasks.c.task_id).where(review_tasks.c.round != "")
        with self.engine.connect() as conn:
            return {(q, r): (p, t) for q, r, p, t in conn.execute(query)}

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
