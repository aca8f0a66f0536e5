"""The ingest flow: sources into the store, then the caption-richness check."""

from __future__ import annotations

import os
from pathlib import Path

from prefect import flow

from benchsmith.records import stable_hash
from benchsmith.settings import Settings
from benchsmith.store import Store
from flows.tasks import new_run_id, stage_task, timed


def listing_token(location: Path) -> str:
    """Changes when files are added, removed, resized or touched under `location`."""
    if location.is_file():
        stat = location.stat()
        return stable_hash(str(location.resolve()), stat.st_size, stat.st_mtime_ns)
    entries = []
    for dirpath, _dirs, files in os.walk(location):
        for name in files:
            stat = os.stat(os.path.join(dirpath, name))
            entries.append((os.path.join(dirpath, name), stat.st_size, stat.st_mtime_ns))
    return stable_hash(str(location.resolve()), sorted(entries))


def _ingest_source(settings: Settings, run_id: str, location: str, settings_fingerprint: str,
                   listing: str, store_state: str) -> dict:
    from benchsmith.ingest import candidates_for, ingest

    with Store(settings.db_url) as store:
        def work() -> dict:
            report = ingest(store, settings.media_dir, candidates_for(Path(location)), settings.ingest,
                            label=location)
            return {"seen": report.seen, "added": report.added, "unchanged": report.unchanged,
                    "refused": dict(report.rejected)}
        return timed(store, run_id, f"ingest:{Path(location).name}", work)


def _richness(settings: Settings, run_id: str, settings_fingerprint: str, store_state: str) -> dict:
    from filters import richness

    with Store(settings.db_url) as store:
        def work() -> dict:
            judged, excluded = richness.apply(store, settings.ingest.richness)
            return {"judged": judged, "excluded": excluded}
        return timed(store, run_id, "richness", work)


def ingest_stage(settings: Settings, run_id: str, sources: list[str]) -> dict:
    """Tasks for each source and the richness check; callable inside any flow."""
    results = {}
    ingest_task = stage_task("ingest", settings, _ingest_source)
    richness_task = stage_task("richness", settings, _richness)
    fingerprint = settings.fingerprint()
    for location in sources:
        with Store(settings.db_url) as store:
            state = store.state_token()
        results[f"ingest {location}"] = ingest_task(settings, run_id, location, fingerprint,
                                                    listing_token(Path(location)), state)
    with Store(settings.db_url) as store:
        state = store.state_token()
    results["richness"] = richness_task(settings, run_id, fingerprint, state)
    return results


@flow(name="benchsmith-ingest")
def ingest_flow(settings: Settings, sources: list[str]) -> dict:
    return ingest_stage(settings, new_run_id(), sources)
