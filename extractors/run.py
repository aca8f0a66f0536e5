"""Extraction as a runner stage: each extractor over the usable images it has not seen, in batches.

Each configured extractor is one `ExtractStage` of the runner (benchsmith/runner.py): ledger stage
`extract`, config key = the extractor's key (backend, model and the parameters that change what is
found), subject = the image id. So a changed threshold is new work, a changed batch size or device is
not, and a rerun with nothing pending never loads a model. Every extractor with work first passes
cheap checks (device, weights on disk), so a missing model stops the run before any extractor has
written. Facts are written as each batch finishes; a crash loses at most the batch in flight. An image
that cannot be read, or on which the backend fails, is recorded as failed with its reason and the run
goes on (the runner redoes a failing batch one image at a time to find it); `extract.retry_failed`
(or `--retry-failed`) tries those again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

from benchsmith import runner
from benchsmith.images import open_rgb
from benchsmith.records import Fact
from benchsmith.settings import Settings
from benchsmith.store import Store
from benchsmith.store.facts import EXTRACT_STAGE
from extractors.base import Backend, ExtractSettings, Loaded, build_extractors

# Holds the models of GPU backends to `extract.gpu_concurrency` at a time within this process.
_gpu_slots: dict[int, threading.BoundedSemaphore] = {}
_gpu_lock = threading.Lock()


def gpu_slot(limit: int) -> threading.BoundedSemaphore:
    with _gpu_lock:
        return _gpu_slots.setdefault(limit, threading.BoundedSemaphore(limit))


@dataclass(frozen=True)
class Found:
    """What an extractor made of one image: its facts, or why it could not (`failure`)."""

    facts: list[Fact]
    seconds: float = 0.0
    failure: str = ""


class ExtractStage(runner.Stage):
    """One extractor over every usable image it has no ledger row for, as a runner stage."""

    name = EXTRACT_STAGE

    def __init__(self, extractor: Backend, settings: Settings) -> None:
        self.extractor, self.settings = extractor, settings
        self.label = f"extract {extractor.name}"

    def config_key(self) -> str:
        return self.extractor.key

    def units(self, context: runner.StageContext) -> list[str]:
        return context.store.item_ids(kind="image")

    def subject(self, item_id: str) -> str:
        return item_id

    def windows(self) -> tuple[int, int | None]:
        return self.extractor.batch_size, None

    def prepare(self, context: runner.StageContext, ids: Sequence[str]) -> None:
        self.extractor.load()

    def process(self, ids: Sequence[str], context: runner.StageContext) -> Iterator[tuple[str, Found]]:
        ready: list[Loaded] = []
        for image in context.store.get_items(ids):
            try:
                pixels = open_rgb(self.settings.media_dir / image.path) if self.extractor.needs_pixels else None
            except Exception as exc:  # noqa: BLE001 - any unreadable file is the image's failure, not the run's
                yield image.id, Found([], failure=f"image cannot be read: {_reason(exc)}")
                continue
            ready.append(Loaded(image, pixels))
        if not ready:
            return
        started = time.perf_counter()
        found = self.extractor.extract(ready)  # raising here makes the runner retry the batch image by image
        share = (time.perf_counter() - started) / len(ready)
        for loaded, facts in zip(ready, found, strict=True):
            yield loaded.image.id, Found(facts, seconds=share)

    def commit(self, context: runner.StageContext, pairs: list[tuple[str, Found]],
               report: runner.StageReport) -> list[runner.Outcome]:
        context.store.add_facts(self.extractor.key, [fact for _id, found in pairs for fact in found.facts])
        report.counters["facts"] += sum(len(found.facts) for _id, found in pairs)
        return [runner.Outcome(item_id, "failed" if found.failure else "done", found.failure,
                               {"n_facts": len(found.facts), "seconds": round(found.seconds, 4)})
                for item_id, found in pairs]


def extract(store: Store, settings: Settings, *, only: Sequence[str] | None = None,
            retry_failed: bool | None = None, limit: int | None = None,
            subjects: Collection[str] | None = None) -> dict[str, runner.StageReport]:
    """Run the configured extractors on every image that lacks their facts (of `subjects`, the item ids of
    one shard, when given); return the runner's report per name (counter `facts`)."""
    section = settings.section("extract", ExtractSettings)
    retry = section.retry_failed if retry_failed is None else retry_failed
    stages = [ExtractStage(e, settings) for e in build_extractors(settings, only)]
    wanted = None if subjects is None else set(subjects)
    waiting = {stage.extractor.name: [u for u in runner.pending(stage, store, retry_failed=retry)
                                      if wanted is None or stage.subject(u) in wanted] for stage in stages}
    for stage in stages:
        if waiting[stage.extractor.name]:
            stage.extractor.check()  # a missing model or device stops the run before any extractor has written
    reports = {}
    while stages:
        stage = stages.pop(0)  # dropped after its turn, so its model is freed before the next one loads
        with gpu_slot(section.gpu_concurrency) if stage.extractor.uses_gpu else nullcontext():
            reports[stage.extractor.name] = runner.run(stage, store, units=waiting.pop(stage.extractor.name)[:limit])
    return reports


def _reason(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
