"""Conversations and their status history: the same status machine as questions."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from collections.abc import Mapping

from benchsmith.records import TRANSITIONS, Conversation, ConversationReview, Verdict, utcnow
from benchsmith.store.questions import TransitionError
from benchsmith.store.schema import (conversation_events, conversation_review_tasks, conversation_reviews,
                                     conversations)
from benchsmith.store.sql import chunks, insert_new, upsert


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
        with self.engine.begin() as conn:
            new = insert_new(conn, conversations, [_to_row(c) for c in records])
            if new:
                conn.execute(sa.insert(conversation_events), [
                    {"conversation_id": r["id"], "from_status": None, "to_status": r["status"], "stage": stage,
                     "reason": "", "created_at": r["created_at"]} for r in new])
                new_ids = {r["id"] for r in new}
                self.add_verdicts([v for v in verdicts_for_new if v.subject_id in new_ids], conn=conn)
            return len(new)

    def move_conversations(self, ids: Sequence[str], to_status: str, *, stage: str, reason: str = "",
                           verdicts_to_add: Sequence[Verdict] = (), updates: dict[str, dict] | None = None) -> int:
        """Move conversations to a new status, checking and logging each move; `updates` sets fields
        (review_turns, meta) per id in the same transaction. Returns how many moved."""
        now = utcnow()
        moved = 0
        with self.engine.begin() as conn:
            for batch in chunks(list(ids)):
                current = dict(conn.execute(sa.select(conversations.c.id, conversations.c.status)
                                            .where(conversations.c.id.in_(batch))).all())
                missing = set(batch) - set(current)
                if missing:
                    raise KeyError(f"unknown conversation ids: {sorted(missing)[:3]}")
                to_move = [cid for cid in batch if current[cid] != to_status or to_status == "published"]
                for cid in to_move:
                    if to_status not in TRANSITIONS[current[cid]]:
                        raise TransitionError(f"conversation {cid} cannot move from {current[cid]} to {to_status}")
                updated = [cid for cid in to_move if (updates or {}).get(cid)]
                plain = [cid for cid in to_move if not (updates or {}).get(cid)]
                if plain:  # one statement for the common move without per-conversation fields
                    conn.execute(sa.update(conversations).where(conversations.c.id.in_(plain)).values(
                        status=to_status, updated_at=now))
                for cid in updated:
                    conn.execute(sa.update(conversations).where(conversations.c.id == cid).values(
                        status=to_status, updated_at=now, **_updatable(updates[cid])))
                if to_move:
                    conn.execute(sa.insert(conversation_events), [
                        {"conversation_id": cid, "from_status": current[cid], "to_status": to_status,
                         "stage": stage, "reason": reason, "created_at": now} for cid in to_move])
                moved += len(to_move)
            self.add_verdicts(verdicts_to_add, conn=conn)
        return moved

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

    def conversation_counts(self) -> dict[str, int]:
        """status -> count."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(conversations.c.status, sa.func.count()).group_by(conversations.c.status))
            return dict(rows.all())

    def conversation_events(self, conversation_id: str) -> list[dict]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(conversation_events)
                                .where(conversation_events.c.conversation_id == conversation_id)
                                .order_by(conversation_events.c.id))
            return [dict(r._mapping) for r in rows]

    def set_conversation_review_turns(self, conversation_id: str, turns) -> None:
        """Replace the reviewed turns of a conversation (a later accepted edit); its status stays."""
        with self.engine.begin() as conn:
            conn.execute(sa.update(conversations).where(conversations.c.id == conversation_id).values(
                updated_at=utcnow(), **_updatable({"review_turns": turns})))

    # -- review ----------------------------------------------------------------------------------------

    def record_conversation_review_intents(self, conversation_ids: Sequence[str], project_id: int) -> None:
        """Note that these conversations are about to be sent to `project_id` (no task id yet)."""
        now = utcnow()
        with self.engine.begin() as conn:
            upsert(conn, conversation_review_tasks, [{"conversation_id": cid, "project_id": project_id,
                                                      "task_id": None, "pushed_at": now} for cid in conversation_ids])

    def set_conversation_review_task_ids(self, task_ids: Mapping[str, int]) -> None:
        if not task_ids:
            return
        with self.engine.begin() as conn:
            conn.execute(sa.update(conversation_review_tasks)
                         .where(conversation_review_tasks.c.conversation_id == sa.bindparam("cid"))
                         .values(task_id=sa.bindparam("tid")),
                         [{"cid": cid, "tid": tid} for cid, tid in task_ids.items()])

    def get_conversation_review_tasks(self) -> dict[str, tuple[int, int | None]]:
        """conversation id -> (project id, task id or None while the push is unconfirmed)."""
        t = conversation_review_tasks
        with self.engine.connect() as conn:
            return {c: (p, k) for c, p, k in conn.execute(sa.select(t.c.conversation_id, t.c.project_id, t.c.task_id))}

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


def _updatable(values: dict) -> dict:
    """Only review edits and meta change after generation: the generated turns make the id."""
    extra = set(values) - {"review_turns", "meta"}
    if extra:
        raise ValueError(f"only review_turns and meta can be updated, not {sorted(extra)}")
    if values.get("review_turns") is not None:
        values = {**values, "review_turns": [t if isinstance(t, dict) else t.model_dump()
                                             for t in values["review_turns"]]}
    return values
