"""The publish stage as a Prefect task on a real Prefect server."""

from __future__ import annotations

from benchsmith.settings import load_settings
from benchsmith.store import Store
from tests.publish.conftest import build_reviewed


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
