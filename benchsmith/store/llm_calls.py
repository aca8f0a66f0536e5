"""The durable cache and cost ledger of LLM calls: a call made once is never paid for again."""

from __future__ import annotations

import sqlalchemy as sa

from benchsmith.records import utcnow
from benchsmith.store.schema import llm_calls
from benchsmith.store.sql import upsert


class LlmCallsMixin:
    engine: sa.Engine

    def get_llm_call(self, key: str) -> dict | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(llm_calls).where(llm_calls.c.key == key)).first()
            return dict(row._mapping) if row else None

    def put_llm_call(self, **row) -> None:
        """Store a finished call (status 'ok' with its response, or 'error' with the reason)."""
        with self.engine.begin() as conn:
            upsert(conn, llm_calls, [row | {"created_at": utcnow()}])

    def llm_totals(self) -> dict[tuple[str, str, str], dict]:
        """(purpose, model, status) -> calls, tokens in/out and cost."""
        c = llm_calls.c
        query = sa.select(c.purpose, c.model, c.status, sa.func.count(), sa.func.sum(c.tokens_in),
                          sa.func.sum(c.tokens_out), sa.func.sum(c.cost_usd)).group_by(c.purpose, c.model, c.status)
        with self.engine.connect() as conn:
            return {(p, m, s): {"calls": n, "tokens_in": ti or 0, "tokens_out": to or 0, "cost_usd": cost or 0.0}
                    for p, m, s, n, ti, to, cost in conn.execute(query)}
