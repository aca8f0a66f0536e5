"""Running extractors over the store: only the images an extractor has not seen, in batches.

For each configured extractor the store is asked which usable images lack a record under its key.
Nothing pending means the model is never loaded, so a rerun costs a few queries. Every extractor with
work first passes cheap checks (device, weights on disk), so a missing model stops the run before any
extractor has written. Each image's facts
are written in their own transaction, so a crash loses at most the batch in flight. An image that
cannot be read, or on which the backend fails, is recorded as failed with its reason and the run goes
on; `extract.retry_failed` (or `--retry-failed`) tries those again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

from benchsmith.images import open_rgb
from benchsmith.records import Fact
from benchsmith.settings import Settings
from benchsmith.store import Store
from extractors.base import Extractor, ExtractSettings, Loaded, batched, build_extractors

# Holds the models of GPU backends to `extract.gpu_concurrency` at a time within this process.
_gpu_slots: dict[int, threading.BoundedSemaphore] = {}
_gpu_lock = threading.Lock()


def gpu_slot(limit: int) -> threading.BoundedSemaphore:
    with _gpu_lock:
        return _gpu_slots.setdefault(limit, threading.BoundedSemaphore(limit))


@dataclass
class ExtractorReport:
    key: str
    pending: int = 0
    done: int = 0
    failed: int = 0
    facts: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"key": self.key, "pending": self.pending, "done": self.done, "failed": self.failed,
                "facts": self.facts, "seconds": round(self.seconds, 3)}


Progress = Callable[[str, int], Callable[[int], None]]  # (description, total) -> advance(n)


def extract(store: Store, settings: Settings, *, only: Sequence[str] | None = None,
            retry_failed: bool | None = None, limit: int | None = None,
            progress: Progress | None = None) -> dict[str, ExtractorReport]:
    """Run the configured extractors on every image that lacks their facts; return a report per name."""
    section = settings.section("extract", ExtractSettings)
    retry = section.retry_failed if retry_failed is None else retry_failed
    work = [(e, store.items_without_extraction(e.key, retry_failed=retry)[:limit])
            for e in build_extractors(settings, only)]
    for extractor, pending in work:
        if pending:
            extractor.check()  # a missing model or device stops the run before any extractor has written
    reports = {}
    while work:
        extractor, pending = work.pop(0)  # dropped after its turn, so its model is freed before the next loads
        report = reports[extractor.name] = ExtractorReport(extractor.key, pending=len(pending))
        if not pending:
            continue
        advance = progress(f"extract {extractor.name}", len(pending)) if progress else (lambda n: None)
        with gpu_slot(section.gpu_concurrency) if extractor.uses_gpu else nullcontext():
            extractor.load()
            for ids in batched(pending, extractor.batch_size):
                _run_batch(store, settings, extractor, ids, report)
                advance(len(ids))
    return reports


def _run_batch(store: Store, settings: Settings, extractor: Extractor, ids: Sequence[str],
               report: ExtractorReport) -> None:
    images = {image.id: image for image in store.get_items(ids)}
    ready: list[Loaded] = []
    for item_id in ids:
        image = images.get(item_id)
        if image is None:
            continue
        try:
            pixels = open_rgb(settings.media_dir / image.path) if extractor.needs_pixels else None
        except Exception as exc:  # noqa: BLE001 - any unreadable file is the image's failure, not the run's
            _record_failure(store, extractor, item_id, f"image cannot be read: {_reason(exc)}", report)
            continue
        ready.append(Loaded(image, pixels))
    if not ready:
        return
    started = time.perf_counter()
    try:
        found = extractor.extract(ready)
        results = [(loaded, facts, None) for loaded, facts in zip(ready, found, strict=True)]
    except Exception:  # noqa: BLE001 - find out which image of the batch fails, one by one
        results = [_one_by_one(extractor, loaded) for loaded in ready]
    share = (time.perf_counter() - started) / len(ready)
    report.seconds += share * len(ready)
    for loaded, facts, error in results:
        if error is not None:
            _record_failure(store, extractor, loaded.image.id, error, report, seconds=share)
            continue
        store.record_extraction(loaded.image.id, extractor.key, facts, seconds=share)
        report.done += 1
        report.facts += len(facts)


def _one_by_one(extractor: Extractor, loaded: Loaded) -> tuple[Loaded, list[Fact], str | None]:
    try:
        return loaded, extractor.extract([loaded])[0], None
    except Exception as exc:  # noqa: BLE001
        return loaded, [], f"{extractor.name} failed: {_reason(exc)}"


def _record_failure(store: Store, extractor: Extractor, item_id: str, reason: str, report: ExtractorReport,
                    seconds: float = 0.0) -> None:
    store.record_extraction(item_id, extractor.key, [], status="failed", reason=reason, seconds=seconds)
    report.failed += 1
    report.failures.append(f"{item_id[:12]}: {reason}")


def _reason(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
