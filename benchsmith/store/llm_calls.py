"""The durable cache and cost ledger of LLM calls: a call made once is never paid for again."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import sqlalchemy as sa

from benchsmith.records import utcnow
from benchsmith.store.schema import llm_calls
from benchsmith.store.sql import chunks, insert_new, select_in, upsert

IN_FLIGHT = "in_flight"


class LlmCallsMixin:
    engine: sa.Engine

    def get_llm_calls(self, keys: Sequence[str]) -> dict[str, dict]:
        """Stored calls by key, in one query per few hundred keys; keys never called are absent."""
        with self.engine.connect() as conn:
            return {row.key: dict(row._mapping)
                    for row in select_in(conn, sa.select(llm_calls), llm_calls.c.key, list(dict.fromkeys(keys)))}

    def put_llm_calls(self, rows: Sequence[dict]) -> None:
        """Store finished calls (status 'ok' with the response, or 'error' with the reason), in one transaction."""
        now = utcnow()
        unique = {row["key"]: row | {"created_at": now} for row in rows}  # one statement may not touch a row twice
        with self.engine.begin() as conn:
            upsert(conn, llm_calls, list(unique.values()))

    def claim_llm_calls(self, rows: Sequence[dict], owner: str, stale_after_s: float,
                        dead_owners: Sequence[str] = ()) -> set[str]:
        """Claim the calls in `rows` (key, purpose, model, request) for `owner` before sending them, so two
        processes on one store never pay for the same prompt. A key is claimed when it has no row yet,
        when its last call failed, or when another owner's claim is older than `stale_after_s` (that
        process died), or at once when its owner is in `dead_owners`. Returns the claimed keys; the others
        are answered or in flight elsewhere. The claim is a row with status 'in_flight' and the owner in
        `error`; the finished call overwrites it."""
        if not rows:
            return set()
        now = utcnow()
        c = llm_calls.c
        taken_over = ((c.status == IN_FLIGHT) & (c.error != owner)
                      & ((c.created_at < now - timedelta(seconds=stale_after_s)) | c.error.in_(list(dead_owners) or [""])))
        with self.engine.begin() as conn:
            return mark_calls(conn, rows, {"status": IN_FLIGHT, "error": owner, "created_at": now}, taken_over)

    def llm_totals(self) -> dict[tuple[str, str, str], dict]:
        """(purpose, model, status) -> calls, tokens in/out and cost."""
        c = llm_calls.c
        query = sa.select(c.purpose, c.model, c.status, sa.func.count(), sa.func.sum(c.tokens_in),
                          sa.func.sum(c.tokens_out), sa.func.sum(c.cost_usd)).group_by(c.purpose, c.model, c.status)
        with self.engine.connect() as conn:
            return {(p, m, s): {"calls": n, "tokens_in": ti or 0, "tokens_out": to or 0, "cost_usd": cost or 0.0}
                    for p, m, s, n, ti, to, cost in conn.execute(query)}


def mark_calls(conn: sa.Connection, calls: Sequence[dict], mark: dict, or_where: sa.ColumnElement) -> set[str]:
    """Give `mark` (status, error, created_at) to the call-cache rows of `calls` (key, purpose, model,
    request) that are new, failed, or match `or_where`; returns the keys that carry it."""
    c = llm_calls.c
    keys = [call["key"] for call in calls]
    insert_new(conn, llm_calls, [call | mark for call in calls])
    marked: set[str] = set()
    for part in chunks(keys):
        conn.execute(llm_calls.update().where(c.key.in_(part), (c.status == "error") | or_where).values(**mark))
        marked.update(conn.scalars(sa.select(c.key).where(c.key.in_(part), c.status == mark["status"],
                                                          c.error == mark["error"])))
    return marked
