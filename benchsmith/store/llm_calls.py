"""The durable cache and cost ledger of LLM calls: a call made once is never paid for again."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from benchsmith.records import utcnow
from benchsmith.store.schema import llm_calls
from benchsmith.store.sql import chunks, upsert


class LlmCallsMixin:
    engine: sa.Engine

    def get_llm_call(self, key: str) -> dict | None:
        return self.get_llm_calls([key]).get(key)

    def get_llm_calls(self, keys: Sequence[str]) -> dict[str, dict]:
        """Stored calls by key, in one query per few hundred keys; keys never called are absent."""
        found: dict[str, dict] = {}
        with self.engine.connect() as conn:
            for batch in chunks(list(dict.fromkeys(keys))):
                for row in conn.execute(sa.select(llm_calls).where(llm_calls.c.key.in_(batch))):
                    found[row.key] = dict(row._mapping)
        return found

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
