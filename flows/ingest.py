"""The ingest flow: sources into the store, then the caption-richness check."""

from __future__ import annotations

import os
from pathlib import Path

from prefect import flow

from benchsmith.records import stable_hash
from benchsmith.settings import Settings
from flows.tasks import new_run_id, run_stage


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


def ingest_stage(settings: Settings, run_id: str, sources: list[str], options: dict | None = None) -> dict:
    """One task per source, then the richness check; callable inside any flow. `options` are ingest's own:
    source, license, image_column, workers."""
    from ingest.sources import ingest_location

    options = options or {}
    results = {}
    for location in sources:
        def ingest_source(store, location=location) -> dict:
            report = ingest_location(store, settings, Path(location), **options)
            return {"seen": report.seen, "added": report.added, "unchanged": report.unchanged,
                    "refused": dict(report.rejected)}
        identity = {k: v for k, v in options.items() if k != "workers"}  # workers change speed, not the result
        results[f"ingest {location}"] = run_stage(settings, run_id, f"ingest:{Path(location).name}", ingest_source,
                                                  reads=(), sections=("ingest",),
                                                  input_token=stable_hash(listing_token(Path(location)), identity))
    results["richness"] = richness_stage(settings, run_id)
    return results


def richness_stage(settings: Settings, run_id: str) -> dict:
    from filters import richness

    def judge(store) -> dict:
        judged, excluded = richness.apply(store, settings.ingest.richness)
        return {"judged": judged, "excluded": excluded}
    return run_stage(settings, run_id, "richness", judge, reads=("items", "facts"), sections=("ingest",))


@flow(name="benchsmith-ingest")
def ingest_flow(settings: Settings, sources: list[str]) -> dict:
    return ingest_stage(settings, new_run_id(), sources)
