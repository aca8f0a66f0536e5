"""Questions and their status history."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from benchsmith.records import TRANSITIONS, Question, Verdict, utcnow
from benchsmith.store.schema import question_events, questions
from benchsmith.store.sql import chunks, insert_new


class TransitionError(ValueError):
    """A question was asked to move to a status its current status cannot reach."""


def _to_row(q: Question) -> dict:
    now = utcnow()
    return {
        "id": q.id, "item_id": q.item_id, "dimension_id": q.dimension_id, "text": q.text,
        "options": list(q.options), "answer": q.answer, "status": q.status,
        "generator": q.provenance.backend, "model": q.provenance.model,
        "prompt_version": q.provenance.prompt_version, "provenance": q.provenance.model_dump(),
        "meta": q.meta, "review_answer": q.review_answer, "review_dimension_id": q.review_dimension_id,
        "created_at": now, "updated_at": now,
    }


def _from_row(row) -> Question:
    return Question(
        item_id=row.item_id, dimension_id=row.dimension_id, text=row.text, options=row.options,
        answer=row.answer, provenance=row.provenance, meta=row.meta, status=row.status,
        review_answer=row.review_answer, review_dimension_id=row.review_dimension_id,
    )


class QuestionsMixin:
    engine: sa.Engine

    def add_questions(self, records: Sequence[Question], *, stage: str,
                      verdicts_for_new: Sequence[Verdict] = ()) -> int:
        """Store questions not seen before, with their first status event; return how many were new.

        `verdicts_for_new` are written in the same transaction, so a crash never leaves a question
        without the verdict that explains its status.
        """
        with self.engine.begin() as conn:
            new = insert_new(conn, questions, [_to_row(q) for q in records])
            if new:
                conn.execute(sa.insert(question_events), [
                    {"question_id": r["id"], "from_status": None, "to_status": r["status"], "stage": stage,
                     "reason": "", "created_at": r["created_at"]} for r in new])
                new_ids = {r["id"] for r in new}
                self.add_verdicts([v for v in verdicts_for_new if v.subject_id in new_ids], conn=conn)
            return len(new)

    def move_questions(self, ids: Sequence[str], to_status: str, *, stage: str, reason: str = "",
                       verdicts_to_add: Sequence[Verdict] = (), updates: dict | None = None) -> int:
        """Move questions to a new status, checking each move and logging it; return how many moved.

        A question already in `to_status` is left alone, so a repeated call is harmless.
        """
        now = utcnow()
        moved = 0
        with self.engine.begin() as conn:
            for batch in chunks(list(ids)):
                current = dict(conn.execute(
                    sa.select(questions.c.id, questions.c.status).where(questions.c.id.in_(batch))).all())
                missing = set(batch) - set(current)
                if missing:
                    raise KeyError(f"unknown question ids: {sorted(missing)[:3]}")
                to_move = [qid for qid in batch if current[qid] != to_status or to_status == "published"]
                for qid in to_move:
                    if to_status not in TRANSITIONS[current[qid]]:
                        raise TransitionError(f"question {qid} cannot move from {current[qid]} to {to_status}")
                if not to_move:
                    continue
                conn.execute(sa.update(questions).where(questions.c.id.in_(to_move)).values(
                    status=to_status, updated_at=now, **(updates or {})))
                conn.execute(sa.insert(question_events), [
                    {"question_id": qid, "from_status": current[qid], "to_status": to_status, "stage": stage,
                     "reason": reason, "created_at": now} for qid in to_move])
                moved += len(to_move)
            self.add_verdicts(verdicts_to_add, conn=conn)
        return moved

    def update_questions(self, updates: dict[str, dict]) -> None:
        """Set review fields or meta on questions, by id. Text and options are never changed: they make
        the id, and a published question must not change silently."""
        allowed = {"review_answer", "review_dimension_id", "meta"}
        for values in updates.values():
            if set(values) - allowed:
                raise ValueError(f"only {sorted(allowed)} can be updated, not {sorted(set(values) - allowed)}")
        with self.engine.begin() as conn:
            for qid, values in updates.items():
                conn.execute(sa.update(questions).where(questions.c.id == qid).values(**values, updated_at=utcnow()))

    def get_questions(self, *, status: str | Sequence[str] | None = None, dimension_id: int | None = None,
                      ids: Sequence[str] | None = None, item_id: str | None = None,
                      item_ids: Sequence[str] | None = None) -> list[Question]:
        """Questions in a stable order (a stage's missing work is what the work ledger lacks)."""
        query = sa.select(questions).order_by(questions.c.created_at, questions.c.id)
        if isinstance(status, str):
            query = query.where(questions.c.status == status)
        elif status is not None:
            query = query.where(questions.c.status.in_(list(status)))
        if dimension_id is not None:
            query = query.where(questions.c.dimension_id == dimension_id)
        if item_id is not None:
            query = query.where(questions.c.item_id == item_id)
        with self.engine.connect() as conn:
            if ids is None and item_ids is None:
                return [_from_row(r) for r in conn.execute(query)]
            column, wanted = (questions.c.id, ids) if ids is not None else (questions.c.item_id, item_ids)
            out: list[Question] = []
            for batch in chunks(list(wanted)):
                out.extend(_from_row(r) for r in conn.execute(query.where(column.in_(batch))))
            return out

    def question_counts(self) -> dict[tuple[int, str], int]:
        """(dimension_id, status) -> count."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(questions.c.dimension_id, questions.c.status, sa.func.count())
                                .group_by(questions.c.dimension_id, questions.c.status))
            return {(d, s): n for d, s, n in rows}

    def question_events(self, question_id: str) -> list[dict]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(question_events).where(question_events.c.question_id == question_id)
                                .order_by(question_events.c.id))
            return [dict(r._mapping) for r in rows]
