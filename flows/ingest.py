"""The ingest flow: sources into the store, then the caption-richness check."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from benchsmith.records import stable_hash
from benchsmith.settings import Settings
from flows.tasks import new_run_id, run_stage


def ingest_stage(settings: Settings, run_id: str, sources: list[str], options: dict | None = None) -> dict:
    """One task per source, then the richness check; callable inside any flow. `options` are ingest's own:
    source, license, image_column, workers. A source with nothing new or changed runs no task; otherwise
    its cache key is the set of its candidates that wait under the ingest ledger's key."""
    from benchsmith import runner
    from benchsmith.store import Store
    from ingest.sources import IngestStage, candidates_for, ingest

    options = options or {}
    listing = {k: v for k, v in options.items() if k != "workers"}
    results = {}
    for location in sources:
        with Store(settings.db_url) as store:
            stage = IngestStage(settings.media_dir, candidates_for(Path(location), **listing), settings.ingest,
                                label=location)
            waiting = runner.pending(stage, store)
            token = stable_hash(runner.cache_token(stage, store, waiting), listing)
        if not waiting:
            results[f"ingest {location}"] = {"seen": stage.report.seen, "added": 0, "cached": True}
            continue

        def ingest_source(store, location=location, stage=stage) -> dict:  # the listing the key came from
            report = ingest(store, settings.media_dir, stage.candidates, settings.ingest, label=location,
                            workers=options.get("workers", 1))
            return {"seen": report.seen, "added": report.added, "unchanged": report.unchanged,
                    "skipped": report.skipped, "refused": dict(report.rejected),
                    "boxes_dropped": dict(report.dropped)}
        results[f"ingest {location}"] = run_stage(settings, run_id, f"ingest:{Path(location).name}", ingest_source,
                                                  reads=(), sections=("ingest",), input_token=token)
    results["richness"] = richness_stage(settings, run_id)
    return results


def richness_stage(settings: Settings, run_id: str) -> dict:
    from ingest import richness

    def judge(store) -> dict:
        return richness.apply(store, settings.ingest.richness)._asdict()
    return run_stage(settings, run_id, "richness", judge, reads=("items", "facts"), sections=("ingest",))


@flow(name="benchsmith-ingest")
def ingest_flow(settings: Settings, sources: list[str]) -> dict:
    return ingest_stage(settings, new_run_id(), sources)
