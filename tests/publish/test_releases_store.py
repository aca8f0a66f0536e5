"""The releases part of the store, on SQLite and a real PostgreSQL."""

from __future__ import annotations

import sqlalchemy as sa

from benchsmith.records import Release
from benchsmith.store.schema import reviews


def test_releases_come_back_in_order_with_their_questions_and_hashes(store):
    store.add_release(Release(version="v1", question_ids=["q2", "q1"], changelog={"added": ["q1", "q2"]},
                              meta={"previous": None}), {"q1": "h1", "q2": "h2"})
    store.add_release(Release(version="v2", question_ids=["q1"], changelog={"removed": ["q2"]},
                              meta={"previous": "v1"}), {"q1": "h1b"})
    first, second = store.get_releases()
    assert (first.version, first.question_ids, first.changelog) == ("v1", ["q1", "q2"], {"added": ["q1", "q2"]})
    assert second.meta["previous"] == "v1" and "created_at" in second.meta
    assert store.release_hashes("v2") == {"q1": "h1b"} and store.release_hashes("v3") == {}


def test_reviewer_answers_keep_each_annotators_latest_judgement(store):
    from benchsmith.records import utcnow

    rows = [("q1", "ann", 1, True, 1), ("q1", "ann", 2, True, 2), ("q1", "bob", None, False, 3),
            ("q2", "ann", 0, True, 4)]
    with store.engine.begin() as conn:
        conn.execute(sa.insert(reviews), [
            {"id": f"r{k}", "question_id": q, "task_id": 1, "annotation_id": k, "annotator": who, "answer": answer,
             "dimension_id": None, "keep": keep, "reasons": [], "comment": "", "created_at": utcnow()}
            for q, who, answer, keep, k in rows])
    assert store.reviewer_answers(["q1", "q2", "q3"]) == {"q1": [2, None], "q2": [0]}
