"""The extract flow: each configured extractor as its own stage, then the caption-richness check again."""

from __future__ import annotations

from functools import partial

from prefect import flow

from benchsmith.settings import Settings
from flows.ingest import richness_stage
from flows.tasks import new_run_id, run_stage


def extract_stage(settings: Settings, run_id: str) -> dict:
    """One stage per extractor in `extract.use`, then richness; callable inside any flow. GPU extractors run
    under the Prefect tag `gpu`, so a tag concurrency limit (`prefect concurrency-limit create gpu 1`)
    holds them across flows and machines."""
    from extractors.base import ExtractSettings, build_extractors
    from extractors.run import ExtractStage

    retry = settings.section("extract", ExtractSettings).retry_failed
    results = {}
    for extractor in build_extractors(settings):
        results[f"extract {extractor.name}"] = run_stage(
            settings, run_id, f"extract:{extractor.name}", ExtractStage(extractor, settings),
            partial(extract_shard, settings=settings, name=extractor.name), sharded=True, retry_failed=retry,
            tag="gpu" if extractor.uses_gpu else "")
    results["richness after extract"] = richness_stage(settings, run_id)
    return results


def extract_shard(store, subjects: list[str] | None, *, settings: Settings, name: str) -> dict:
    """Extractor `name` over `subjects` (None: all it has pending); module-level so workers can unpickle it."""
    from extractors.run import extract
    return extract(store, settings, only=[name], subjects=subjects)[name].as_dict()


@flow(name="benchsmith-extract")
def extract_flow(settings: Settings) -> dict:
    return extract_stage(settings, new_run_id())
