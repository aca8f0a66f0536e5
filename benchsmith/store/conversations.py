"""Conversations: three-turn items. Their reviews are in reviews.py; where each stands lives in the
shared lifecycle (lifecycle.py)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from benchsmith.records import Conversation, Verdict
from benchsmith.store.schema import conversations
from benchsmith.store.sql import select_in, where_status


class ConversationsMixin:
    engine: sa.Engine

    def add_conversations(self, records: Sequence[Conversation], *, stage: str,
                          verdicts_for_new: Sequence[Verdict] = ()) -> int:
        """Store conversations not seen before with their first status event (and, in the same
        transaction, the verdicts that explain it); return how many were new."""
        return self._add_items("conversation", records, stage, verdicts_for_new)

    def get_conversations(self, *, status: str | Sequence[str] | None = None, ids: Sequence[str] | None = None,
                          item_id: str | None = None) -> list[Conversation]:
        query = where_status(sa.select(conversations).order_by(conversations.c.created_at, conversations.c.id),
                             conversations.c.status, status)
        if item_id is not None:
            query = query.where(conversations.c.item_id == item_id)
        with self.engine.connect() as conn:
            return [Conversation.model_validate(r, from_attributes=True)
                    for r in select_in(conn, query, conversations.c.id, ids)]
