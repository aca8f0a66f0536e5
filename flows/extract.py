"""The extract flow: each configured extractor as its own cached stage, then the caption-richness check again."""

from __future__ import annotations

from contextlib import nullcontext
from functools import partial

from prefect import flow, tags

from benchsmith.settings import Settings
from flows.ingest import richness_stage
from flows.tasks import new_run_id, run_sharded


def extract_stage(settings: Settings, run_id: str) -> dict:
    """One stage per extractor in `extract.use`, then richness; callable inside any flow. An extractor with
    no image pending runs no task at all; otherwise its cache key is its pending images under its key.

    GPU extractors run under the Prefect tag `gpu`, so a tag concurrency limit
    (`prefect concurrency-limit create gpu 1`) holds them across flows and machines.
    """
    from benchsmith import runner
    from benchsmith.store import Store
    from extractors.base import ExtractSettings, build_extractors
    from extractors.run import ExtractStage

    retry = settings.section("extract", ExtractSettings).retry_failed
    results = {}
    for extractor in build_extractors(settings):
        stage = ExtractStage(extractor, settings)
        with Store(settings.db_url) as store:
            pending = runner.pending(stage, store, retry_failed=retry)
            token = runner.cache_token(stage, store, pending)
        if not pending:
            results[f"extract {extractor.name}"] = {"key": extractor.key, "pending": 0, "cached": True}
            continue

        work = partial(extract_shard, settings=settings, name=extractor.name)
        with tags("gpu") if extractor.uses_gpu else nullcontext():
            results[f"extract {extractor.name}"] = run_sharded(
                settings, run_id, f"extract:{extractor.name}", work, [stage.subject(u) for u in pending],
                reads=(), sections=("extract",), input_token=token, gpu=extractor.uses_gpu)
    results["richness after extract"] = richness_stage(settings, run_id)
    return results


def extract_shard(store, subjects: list[str] | None, *, settings: Settings, name: str) -> dict:
    """Extractor `name` over `subjects` (None: all it has pending); module-level so workers can unpickle it."""
    from extractors.run import extract
    return extract(store, settings, only=[name], subjects=subjects)[name].as_dict()


@flow(name="benchsmith-extract")
def extract_flow(settings: Settings) -> dict:
    return extract_stage(settings, new_run_id())
