"""The releases part of the store, on SQLite and a real PostgreSQL."""

from __future__ import annotations

from benchsmith.records import Release


def test_releases_come_back_in_order_with_their_questions_and_hashes(store):
    store.add_release(Release(version="v1", question_ids=["q2", "q1"], changelog={"added": ["q1", "q2"]},
                              meta={"previous": None}), {"question": {"q1": "h1", "q2": "h2"}})
    store.add_release(Release(version="v2", question_ids=["q1"], changelog={"removed": ["q2"]},
                              meta={"previous": "v1"}), {"question": {"q1": "h1b"}})
    first, second = store.get_releases()
    assert (first.version, first.question_ids, first.changelog) == ("v1", ["q1", "q2"], {"added": ["q1", "q2"]})
    assert second.meta["previous"] == "v1" and "created_at" in second.meta
    assert store.release_hashes("v2") == {"q1": "h1b"} and store.release_hashes("v3") == {}
