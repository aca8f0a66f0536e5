"""Batch jobs of LLM calls: the job rows, and the call-cache rows of the requests each job carries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from benchsmith.records import utcnow
from benchsmith.store.schema import llm_batches, llm_calls
from benchsmith.store.llm_calls import mark_calls
from benchsmith.store.sql import insert_new, upsert

IN_BATCH = "in_batch"
CLOSED = ("collected", "abandoned")  # a job whose answers are stored, or one that never reached the provider


def in_batch(batch_id: str) -> str:
    """What the `error` column of a call-cache row says while the call waits in batch `batch_id`."""
    return f"in batch {batch_id}"


class LlmBatchesMixin:
    engine: sa.Engine

    def start_llm_batch(self, batch: dict[str, Any], calls: Sequence[dict]) -> set[str]:
        """Record a batch job about to be uploaded and mark its calls (key, purpose, model, request) as
        waiting in it, in one transaction, before anything is sent. A call answered meanwhile, or already
        in another batch, is left alone. Returns the keys the batch carries."""
        now = utcnow()
        with self.engine.begin() as conn:
            taken = mark_calls(conn, calls, {"status": IN_BATCH, "error": in_batch(batch["id"]), "created_at": now},
                               sa.false())
            if taken:
                insert_new(conn, llm_batches, [batch | {"requests": len(taken), "created_at": now}])
        return taken

    def update_llm_batch(self, batch_id: str, **values: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(llm_batches.update().where(llm_batches.c.id == batch_id).values(**values))

    def get_llm_batches(self, statuses: Sequence[str] | None = None, *, open_only: bool = False) -> list[dict]:
        """Batch jobs, oldest first; with `statuses`, only those; `open_only`: those not yet closed (still
        at the provider, or ended there and not yet collected)."""
        query = sa.select(llm_batches).order_by(llm_batches.c.created_at, llm_batches.c.id)
        if statuses is not None:
            query = query.where(llm_batches.c.status.in_(list(statuses)))
        if open_only:
            query = query.where(llm_batches.c.status.not_in(CLOSED))
        with self.engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def llm_batch_calls(self, batch_id: str) -> dict[str, dict]:
        """The call-cache rows still waiting in batch `batch_id`, by key."""
        c = llm_calls.c
        with self.engine.connect() as conn:
            return {row.key: dict(row._mapping)
                    for row in conn.execute(sa.select(llm_calls).where(c.status == IN_BATCH,
                                                                       c.error == in_batch(batch_id)))}

    def finish_llm_batch(self, batch_id: str, answers: Sequence[dict], unanswered: str, **values: Any) -> None:
        """Store a batch's answers (call-cache rows, as live calls store theirs), release the calls it left
        unanswered as failed with `unanswered` (a later run asks again), and close the job with `values`,
        in one transaction."""
        now = utcnow()
        c = llm_calls.c
        with self.engine.begin() as conn:
            upsert(conn, llm_calls, [row | {"created_at": now} for row in answers])
            conn.execute(llm_calls.update().where(c.status == IN_BATCH, c.error == in_batch(batch_id))
                         .values(status="error", error=unanswered, created_at=now))
            conn.execute(llm_batches.update().where(llm_batches.c.id == batch_id)
                         .values(finished_at=now, **values))
