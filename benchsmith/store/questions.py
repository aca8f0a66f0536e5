"""Questions: four-option items. Where each stands lives in the shared lifecycle (lifecycle.py)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from benchsmith.records import GATE_STAGE, Question, Verdict
from benchsmith.store.schema import questions, verdicts
from benchsmith.store.sql import count_by, select_in, where_status


class QuestionsMixin:
    engine: sa.Engine

    def add_questions(self, records: Sequence[Question], *, stage: str,
                      verdicts_for_new: Sequence[Verdict] = ()) -> int:
        """Store questions not seen before, with their first status event; return how many were new.

        `verdicts_for_new` are written in the same transaction, so a crash never leaves a question
        without the verdict that explains its status.
        """
        return self._add_items("question", records, stage, verdicts_for_new)

    def get_questions(self, *, status: str | Sequence[str] | None = None, dimension_id: int | None = None,
                      ids: Sequence[str] | None = None, item_id: str | None = None,
                      item_ids: Sequence[str] | None = None) -> list[Question]:
        """Questions in a stable order (a stage's missing work is what the work ledger lacks)."""
        query = where_status(sa.select(questions).order_by(questions.c.created_at, questions.c.id),
                             questions.c.status, status)
        if dimension_id is not None:
            query = query.where(questions.c.dimension_id == dimension_id)
        if item_id is not None:
            query = query.where(questions.c.item_id == item_id)
        column, wanted = (questions.c.id, ids) if ids is not None else (questions.c.item_id, item_ids)
        with self.engine.connect() as conn:
            return [Question.model_validate(r, from_attributes=True) for r in select_in(conn, query, column, wanted)]

    def questions_past_gate(self) -> list[Question]:
        """Every question the quality gate let through and no later generation replaced, whatever became of
        it after (judged, dropped by the blind filter, reviewed, published), in id order: a pool fixed by
        what was generated, not by what is still waiting."""
        failed = sa.select(verdicts.c.subject_id).where(verdicts.c.stage == GATE_STAGE, verdicts.c.passed.is_(False),
                                                        verdicts.c.subject_kind == "question")
        query = sa.select(questions).where(questions.c.status != "superseded",
                                           questions.c.id.not_in(failed)).order_by(questions.c.id)
        with self.engine.connect() as conn:
            return [Question.model_validate(r, from_attributes=True) for r in conn.execute(query)]

    def question_counts(self) -> dict[tuple[int, str], int]:
        """(dimension_id, status) -> count."""
        return count_by(self.engine, questions.c.dimension_id, questions.c.status)
