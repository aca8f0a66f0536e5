"""The extract flow: each configured extractor as its own cached stage, then the caption-richness check again."""

from __future__ import annotations

from contextlib import nullcontext

from prefect import flow, tags

from benchsmith.settings import Settings
from flows.ingest import richness_stage
from flows.tasks import new_run_id, run_stage


def extract_stage(settings: Settings, run_id: str) -> dict:
    """One stage per extractor in `extract.use`, then richness; callable inside any flow.

    GPU extractors run under the Prefect tag `gpu`, so a tag concurrency limit
    (`prefect concurrency-limit create gpu 1`) holds them across flows and machines.
    """
    from extractors.base import build_extractors

    results = {}
    for extractor in build_extractors(settings):
        def work(store, name=extractor.name) -> dict:
            from extractors.run import extract
            return extract(store, settings, only=[name])[name].as_dict()
        with tags("gpu") if extractor.uses_gpu else nullcontext():
            results[f"extract {extractor.name}"] = run_stage(
                settings, run_id, f"extract:{extractor.name}", work, reads=("items",), sections=("extract",),
                input_token=extractor.key)
    results["richness after extract"] = richness_stage(settings, run_id)
    return results


@flow(name="benchsmith-extract")
def extract_flow(settings: Settings) -> dict:
    return extract_stage(settings, new_run_id())
