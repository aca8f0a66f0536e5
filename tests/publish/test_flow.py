"""The publish stage as a Prefect task on a real Prefect server."""

from __future__ import annotations

import pytest

from benchsmith.settings import load_settings
from benchsmith.store import Store
from tests.publish.conftest import build_reviewed
from tests.publish.test_conversations import add_conversations


def test_the_stage_skips_without_a_version_then_publishes_once_and_reuses_its_result(
        prefect_api, settings, oracle_dir, tmp_path):
    from flows.publish import publish_flow

    assert publish_flow(settings)["publish"].startswith("skipped")
    with Store(settings.db_url) as store:
        reviewed = build_reviewed(store, settings, oracle_dir, tmp_path)

    versioned = load_settings(env={"BENCHSMITH_WORKSPACE": str(settings.workspace),
                                   "BENCHSMITH__PUBLISH__VERSION": "v1"})
    first = publish_flow(versioned)["publish"]
    assert first["version"] == "v1" and first["questions"] == len(reviewed.accepted_ids)
    assert (settings.workspace / "releases" / "v1" / "README.md").is_file()
    with Store(settings.db_url) as store:
        runs = [r for r in store.get_stage_runs() if r["stage"] == "publish"]
        assert len(runs) == 1 and runs[0]["status"] == "done"

    assert publish_flow(versioned)["publish"] == first | {"cached": True}         # nothing changed: served from Prefect's cache
    with Store(settings.db_url) as store:
        assert len([r for r in store.get_stage_runs() if r["stage"] == "publish"]) == 1
        assert [r.version for r in store.get_releases()] == ["v1"]

    with Store(settings.db_url) as store:                          # only conversations change: not served from cache
        items = sorted({q.item_id for q in store.get_questions(ids=sorted(reviewed.accepted_ids))})
        add_conversations(store, items[:4])
    with pytest.raises(Exception, match="already published with different content"):
        publish_flow(versioned)
    v2 = load_settings(env={"BENCHSMITH_WORKSPACE": str(settings.workspace), "BENCHSMITH__PUBLISH__VERSION": "v2"})
    second = publish_flow(v2)["publish"]
    assert second["version"] == "v2" and "cached" not in second
    with Store(settings.db_url) as store:
        assert store.get_releases()[-1].meta["conversations"] == 2
