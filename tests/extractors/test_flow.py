"""The extract stage as Prefect tasks on a real server (kept beside the stage's tests; tests/flows is the lead's)."""

from __future__ import annotations

from ingest.scenes import make_scenes
from benchsmith.store import Store


def test_extract_stage_runs_each_extractor_once_and_a_rerun_is_served_from_cache(prefect_api, settings,
                                                                                tmp_path):
    from ingest.sources import candidates_for
    from ingest.stage import ingest
    from flows.extract import extract_flow

    with Store(settings.db_url) as store:
        ingest(store, settings.media_dir, candidates_for(make_scenes(tmp_path / "scenes", 3, seed=21)),
               settings.ingest, label="scenes")
    first = extract_flow(settings)
    assert first["extract supplied"]["done"] == 3 and first["extract rapidocr"]["done"] == 3
    with Store(settings.db_url) as store:
        assert {(r["stage"], r["status"]) for r in store.get_stage_runs()} >= {
            ("extract:supplied", "done"), ("extract:rapidocr", "done")}
    second = extract_flow(settings)
    assert second["extract rapidocr"] == {"cached": True}  # nothing pending: no task
    with Store(settings.db_url) as store:
        stages = [r["stage"] for r in store.get_stage_runs()]
    assert stages.count("extract:rapidocr") == stages.count("extract:supplied") == 1
