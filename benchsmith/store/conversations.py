"""Conversations: three-turn items, and every version of their reviews. Where each stands lives in the
shared lifecycle (lifecycle.py)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from benchsmith.records import Conversation, ConversationReview, Verdict, utcnow
from benchsmith.store.schema import conversation_reviews, conversations
from benchsmith.store.sql import chunks, insert_new


def _to_row(c: Conversation) -> dict:
    now = utcnow()
    return {
        "id": c.id, "item_id": c.item_id, "turns": [t.model_dump() for t in c.turns], "status": c.status,
        "generator": c.provenance.backend, "model": c.provenance.model,
        "prompt_version": c.provenance.prompt_version, "provenance": c.provenance.model_dump(), "meta": c.meta,
        "review_turns": None if c.review_turns is None else [t.model_dump() for t in c.review_turns],
        "created_at": now, "updated_at": now,
    }


def _from_row(row) -> Conversation:
    return Conversation(item_id=row.item_id, turns=row.turns, provenance=row.provenance, meta=row.meta,
                        status=row.status, review_turns=row.review_turns)


class ConversationsMixin:
    engine: sa.Engine

    def add_conversations(self, records: Sequence[Conversation], *, stage: str,
                          verdicts_for_new: Sequence[Verdict] = ()) -> int:
        """Store conversations not seen before with their first status event (and, in the same
        transaction, the verdicts that explain it); return how many were new."""
        return self._add_items("conversation", [_to_row(c) for c in records], stage, verdicts_for_new)

    def get_conversations(self, *, status: str | Sequence[str] | None = None, ids: Sequence[str] | None = None,
                          item_id: str | None = None) -> list[Conversation]:
        query = sa.select(conversations).order_by(conversations.c.created_at, conversations.c.id)
        if isinstance(status, str):
            query = query.where(conversations.c.status == status)
        elif status is not None:
            query = query.where(conversations.c.status.in_(list(status)))
        if item_id is not None:
            query = query.where(conversations.c.item_id == item_id)
        with self.engine.connect() as conn:
            if ids is None:
                return [_from_row(r) for r in conn.execute(query)]
            out: list[Conversation] = []
            for batch in chunks(list(ids)):
                out.extend(_from_row(r) for r in conn.execute(query.where(conversations.c.id.in_(batch))))
            return out

    # -- review versions ---------------------------------------------------------------------------------

    def add_conversation_reviews(self, records: Sequence[ConversationReview]) -> int:
        """Store review versions not seen before; return how many were new. Versions are never replaced."""
        now = utcnow()
        rows = [r.model_dump(mode="json") | {"id": r.id, "submitted_at": r.submitted_at, "created_at": now}
                for r in records]
        with self.engine.begin() as conn:
            return len(insert_new(conn, conversation_reviews, rows))

    def get_conversation_reviews(self, conversation_ids: Sequence[str] | None = None) -> list[ConversationReview]:
        """Every stored version, oldest submission first."""
        t = conversation_reviews
        query = sa.select(t).order_by(t.c.conversation_id, t.c.submitted_at, t.c.annotation_id, t.c.created_at)
        with self.engine.connect() as conn:
            found = []
            if conversation_ids is None:
                found = list(conn.execute(query))
            else:
                for batch in chunks(list(conversation_ids)):
                    found.extend(conn.execute(query.where(t.c.conversation_id.in_(batch))))
        return [ConversationReview(**{k: v for k, v in r._mapping.items() if k not in ("id", "created_at")})
                for r in found]

