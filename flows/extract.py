"""The extract flow: each configured extractor as its own task, then the caption-richness check again."""

from __future__ import annotations

from prefect import flow

from benchsmith.settings import Settings
from benchsmith.store import Store
from flows.tasks import new_run_id, stage_task, timed


def _extract_one(settings: Settings, run_id: str, name: str, key: str, settings_fingerprint: str,
                 store_state: str) -> dict:
    from extractors.run import extract

    with Store(settings.db_url) as store:
        return timed(store, run_id, f"extract:{name}",
                     lambda: extract(store, settings, only=[name])[name].as_dict())


def _richness(settings: Settings, run_id: str, settings_fingerprint: str, store_state: str) -> dict:
    from filters import richness

    with Store(settings.db_url) as store:
        def work() -> dict:
            judged, excluded = richness.apply(store, settings.ingest.richness)
            return {"judged": judged, "excluded": excluded}
        return timed(store, run_id, "richness:after-extract", work)


def extract_stage(settings: Settings, run_id: str) -> dict:
    """One task per extractor in `extract.use` (GPU ones tagged `gpu` for Prefect's concurrency limit),
    then richness; callable inside any flow."""
    from extractors.base import build_extractors

    fingerprint = settings.fingerprint()
    results = {}
    for extractor in build_extractors(settings):
        task = stage_task(f"extract-{extractor.name}", settings, _extract_one)
        if extractor.uses_gpu:
            task = task.with_options(tags=["gpu"])
        with Store(settings.db_url) as store:
            state = store.state_token()
        results[f"extract {extractor.name}"] = task(settings, run_id, extractor.name, extractor.key,
                                                    fingerprint, state)
    with Store(settings.db_url) as store:
        state = store.state_token()
    results["richness after extract"] = stage_task("richness", settings, _richness)(settings, run_id, fingerprint,
                                                                                   state)
    return results


@flow(name="benchsmith-extract")
def extract_flow(settings: Settings) -> dict:
    return extract_stage(settings, new_run_id())
