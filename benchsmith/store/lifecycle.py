"""The lifecycle every benchmark item shares, whatever its kind: statuses and their history, the review
tasks it was sent in, and the releases that hold it.

A kind (`question`, `conversation`) names the table holding its content; everything about where an
item stands is here, once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlalchemy as sa

from benchsmith.records import GATE_STAGE, TRANSITIONS, Conversation, Question, Verdict, utcnow
from benchsmith.store.schema import conversations, events, questions, release_entries, review_tasks, verdicts
from benchsmith.store.sql import chunks, count_by, insert_new, select_in, upsert

TABLES: dict[str, sa.Table] = {"question": questions, "conversation": conversations}
# What review may change on an item after it was generated: the content that makes its id never moves.
UPDATABLE: dict[str, frozenset[str]] = {
    "question": frozenset({"review_answer", "review_dimension_id", "meta"}),
    "conversation": frozenset({"review_turns", "meta"}),
}


class TransitionError(ValueError):
    """An item was asked to move to a status its current status cannot reach."""


class ContradictionError(ValueError):
    """A write would leave an item with a failed quality-gate verdict in a live status (`candidate` or later)."""


def gate_contradictions(conn: sa.Connection, ids: Sequence[str] | None = None,
                        kinds: Sequence[str] = tuple(TABLES)) -> list[tuple[str, str, str]]:
    """(kind, id, status) of every item (of `ids`, or all; of `kinds`, or every kind) whose quality-gate
    verdict failed while its status is not `dropped`: the gate's drop and the item's status tell two stories."""
    found = []
    for kind in kinds:
        table = TABLES[kind]
        failed = sa.select(verdicts.c.subject_id).where(verdicts.c.stage == GATE_STAGE, verdicts.c.passed.is_(False),
                                                        verdicts.c.subject_kind == kind)
        query = sa.select(table.c.id, table.c.status).where(table.c.id.in_(failed), table.c.status != "dropped")
        found += [(kind, i, status) for i, status in select_in(conn, query, table.c.id, ids)]
    return sorted(found)


def refuse_contradictions(conn: sa.Connection, ids: Sequence[str] | None = None,
                          kinds: Sequence[str] = tuple(TABLES)) -> None:
    if found := gate_contradictions(conn, ids, kinds):
        kind, i, status = found[0]
        raise ContradictionError(f"{len(found)} item(s) would hold a failed quality-gate verdict while live, "
                                 f"e.g. {kind} {i} in status {status!r}")


class LifecycleMixin:
    engine: sa.Engine

    def _add_items(self, kind: str, records: Sequence[Question | Conversation], stage: str,
                   verdicts_for_new: Sequence[Verdict]) -> int:
        """Store items not seen before with their first status event and, in the same transaction, the
        verdicts that explain it (a crash never leaves an item without them); return how many were new."""
        with self.engine.begin() as conn:
            new = insert_new(conn, TABLES[kind], [_item_row(r) for r in records])
            if new:
                conn.execute(sa.insert(events), [
                    {"kind": kind, "subject_id": r["id"], "from_status": None, "to_status": r["status"],
                     "stage": stage, "reason": "", "created_at": r["created_at"]} for r in new])
                new_ids = {r["id"] for r in new}
                self.add_verdicts([v for v in verdicts_for_new if v.subject_id in new_ids], conn=conn)
            return len(new)

    def gate_contradictions(self) -> list[tuple[str, str, str]]:
        """(kind, id, status) of every item with a failed quality-gate verdict that is not dropped: empty in
        a sound store, since every write refuses to make one."""
        with self.engine.connect() as conn:
            return gate_contradictions(conn)

    def move(self, kind: str, ids: Sequence[str], to_status: str, *, stage: str, reason: str = "",
             verdicts_to_add: Sequence[Verdict] = (), updates: Mapping | None = None,
             updates_by_id: Mapping[str, Mapping] | None = None) -> int:
        """Move items of `kind` to `to_status`, checking each move and logging it; return how many moved.

        `updates` sets reviewed fields on every moved item, `updates_by_id` per item. An item
        already in `to_status` stays as it is unless that status may follow itself (a revision), so a
        repeated call is harmless: it stays unless it is published again or revised (a move to its own
        status that sets reviewed fields). Verdicts are written in the same transaction.
        """
        table = TABLES[kind]
        common, by_id = updates or {}, updates_by_id or {}
        for values in [common, *by_id.values()]:
            _check_updatable(kind, values)
        now = utcnow()
        moved = 0
        with self.engine.begin() as conn:
            for batch in chunks(list(ids)):
                current = dict(conn.execute(sa.select(table.c.id, table.c.status).where(table.c.id.in_(batch))).all())
                missing = set(batch) - set(current)
                if missing:
                    raise KeyError(f"unknown {kind} ids: {sorted(missing)[:3]}")
                to_move = [i for i in batch if current[i] != to_status or to_status == "published" or (
                    to_status in TRANSITIONS[to_status] and (common or i in by_id))]
                for i in to_move:
                    if to_status not in TRANSITIONS[current[i]]:
                        raise TransitionError(f"{kind} {i} cannot move from {current[i]} to {to_status}")
                if not to_move:
                    continue
                plain = [i for i in to_move if i not in by_id]
                if plain:  # one statement for the common move
                    conn.execute(sa.update(table).where(table.c.id.in_(plain)).values(
                        status=to_status, updated_at=now, **_json_ready(common)))
                for i in [i for i in to_move if i in by_id]:
                    conn.execute(sa.update(table).where(table.c.id == i).values(
                        status=to_status, updated_at=now, **_json_ready({**common, **by_id[i]})))
                conn.execute(sa.insert(events), [
                    {"kind": kind, "subject_id": i, "from_status": current[i], "to_status": to_status, "stage": stage,
                     "reason": reason, "created_at": now} for i in to_move])
                moved += len(to_move)
                if to_status != "dropped":  # a move to `dropped` can only end a contradiction
                    refuse_contradictions(conn, to_move, [kind])
            self.add_verdicts(verdicts_to_add, conn=conn)
        return moved

    def update_reviewed(self, kind: str, updates: Mapping[str, Mapping]) -> None:
        """Set reviewed fields or meta on items by id, their status unchanged (no event: nothing moved)."""
        table = TABLES[kind]
        for values in updates.values():
            _check_updatable(kind, values)
        with self.engine.begin() as conn:
            for i, values in updates.items():
                conn.execute(sa.update(table).where(table.c.id == i).values(**_json_ready(values), updated_at=utcnow()))

    def events(self, subject_id: str) -> list[dict]:
        """The item's status changes, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(events).where(events.c.subject_id == subject_id).order_by(events.c.id))
            return [dict(r._mapping) for r in rows]

    def status_counts(self, kind: str) -> dict[str, int]:
        """status -> how many items of `kind` have it."""
        return {status: n for (status,), n in count_by(self.engine, TABLES[kind].c.status).items()}

    # -- review tasks -----------------------------------------------------------------------------------

    def record_review_intents(self, kind: str, ids: Sequence[str], project_id: int, round: str = "") -> None:
        """Note that these items, none with a confirmed task in `round`, are about to be sent to `project_id`.
        Round "" is the first review; a second look names the release it rechecks."""
        now = utcnow()
        with self.engine.begin() as conn:
            upsert(conn, review_tasks, [{"subject_id": i, "round": round, "kind": kind, "project_id": project_id,
                                         "task_id": None, "pushed_at": now} for i in ids])

    def set_review_task_ids(self, task_ids: Mapping[str, int], round: str = "") -> None:
        """Record the server's task id of each item in `round` (item id -> task id)."""
        if not task_ids:
            return
        with self.engine.begin() as conn:
            conn.execute(sa.update(review_tasks).where(review_tasks.c.subject_id == sa.bindparam("sid"),
                                                       review_tasks.c.round == round)
                         .values(task_id=sa.bindparam("tid")),
                         [{"sid": sid, "tid": tid} for sid, tid in task_ids.items()])

    def get_review_tasks(self, kind: str, ids: Sequence[str] | None = None,
                         round: str = "") -> dict[str, tuple[int, int | None]]:
        """item id -> (project id, task id or None while the push is unconfirmed), in `round`."""
        t = review_tasks
        query = sa.select(t.c.subject_id, t.c.project_id, t.c.task_id).where(t.c.round == round, t.c.kind == kind)
        with self.engine.connect() as conn:
            return {s: (p, k) for s, p, k in select_in(conn, query, t.c.subject_id, ids)}

    def get_second_look_tasks(self) -> dict[tuple[str, str], tuple[int, int | None]]:
        """(question id, round) -> (project id, task id or None) for every round after the first."""
        t = review_tasks
        query = sa.select(t.c.subject_id, t.c.round, t.c.project_id, t.c.task_id).where(t.c.round != "")
        with self.engine.connect() as conn:
            return {(s, r): (p, k) for s, r, p, k in conn.execute(query)}

    # -- releases ---------------------------------------------------------------------------------------

    def release_hashes(self, version: str, kind: str | None = None) -> dict[str, str]:
        """item id -> content hash, as published in `version` (of one kind, or of every kind)."""
        t = release_entries
        query = sa.select(t.c.subject_id, t.c.content_hash).where(t.c.version == version)
        if kind is not None:
            query = query.where(t.c.kind == kind)
        with self.engine.connect() as conn:
            return dict(conn.execute(query).all())


def _item_row(record: Question | Conversation) -> dict:
    """An item's row: its fields, its id, who made it (in columns of their own, to query by) and when."""
    now = utcnow()
    made = record.provenance
    return record.model_dump() | {"id": record.id, "generator": made.backend, "model": made.model,
                                  "prompt_version": made.prompt_version, "created_at": now, "updated_at": now}


def _check_updatable(kind: str, values: Mapping) -> None:
    extra = set(values) - UPDATABLE[kind]
    if extra:
        raise ValueError(f"only {sorted(UPDATABLE[kind])} of a {kind} can change after generation, not {sorted(extra)}")


def _json_ready(values: Mapping) -> dict:
    """Records (reviewed turns) as the plain JSON their columns hold."""
    return {k: [t if isinstance(t, dict) else t.model_dump() for t in v] if k == "review_turns" and v is not None else v
            for k, v in values.items()}
