"""The ingest flow: sources into the store, then the caption-richness check."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from benchsmith.settings import Settings
from flows.tasks import new_run_id, run_stage


def ingest_stage(settings: Settings, run_id: str, sources: list[str], options: dict | None = None) -> dict:
    """One stage per source, then the richness check; callable inside any flow. `options` are ingest's own:
    source, license, image_column, workers."""
    from ingest.sources import candidates_for
    from ingest.stage import IngestStage, ingest

    options = options or {}
    listing = {k: v for k, v in options.items() if k != "workers"}
    results = {}
    for location in sources:
        stage = IngestStage(settings.media_dir, candidates_for(Path(location), **listing), settings.ingest,
                            label=location)

        def ingest_source(store, _subjects, stage=stage) -> dict:  # the listing the pending units came from
            report = ingest(store, settings.media_dir, stage.candidates, settings.ingest, label=location,
                            workers=options.get("workers", 1))
            return {"seen": report.seen, "added": report.added, "unchanged": report.unchanged,
                    "skipped": report.skipped, "refused": dict(report.rejected), "boxes_dropped": dict(report.dropped)}
        results[f"ingest {location}"] = run_stage(settings, run_id, f"ingest:{Path(location).name}", stage,
                                                  ingest_source)
    results["richness"] = richness_stage(settings, run_id)
    return results


def richness_stage(settings: Settings, run_id: str) -> dict:
    from ingest.richness import RichnessStage

    return run_stage(settings, run_id, "richness", RichnessStage(settings.ingest.richness))


@flow(name="benchsmith-ingest")
def ingest_flow(settings: Settings, sources: list[str]) -> dict:
    return ingest_stage(settings, new_run_id(), sources)
