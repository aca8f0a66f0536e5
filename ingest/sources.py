"""Which source reads a location (`candidates_for`): a COCO .json or YOLO .yaml (`ingest.detection`), a
manifest, a Hugging Face dataset, a folder of scanned receipts (`ingest.receipts`) or a folder of images
(`ingest.candidates`). It sits above the sources, which share the primitives in `ingest.candidates`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingest import detection, receipts
from ingest.candidates import (HF_SUFFIXES, MANIFEST_SUFFIXES, Candidate, IngestError, is_saved_dataset,
                               folder_candidates, hf_candidates, manifest_candidates)


def candidates_for(location: Path, **options: Any) -> Iterator[Candidate]:
    """Pick the source type from what `location` is."""
    if not location.exists():
        raise IngestError(f"{location} does not exist")
    image_column, images = options.pop("image_column", None), options.pop("images", None)
    suffix = location.suffix.lower() if location.is_file() else ""
    if suffix == ".json":  # a task kind makes its captions reform annotations (`ingest.cli.check_task_kind`)
        return detection.coco_candidates(location, images=Path(images) if images else None, **options)
    if suffix in (".yaml", ".yml"):
        if options.pop("task", ""):
            raise IngestError(f"{location}: a task kind applies to manifests, datasets and COCO files, not to "
                              "YOLO files (they hold no captions or answers)")
        return detection.yolo_candidates(location, images=Path(images) if images else None, **options)
    if location.is_file() and location.suffix.lower() in MANIFEST_SUFFIXES:
        return manifest_candidates(location, **options)
    if (location.is_file() and location.suffix.lower() in HF_SUFFIXES) or is_saved_dataset(location):
        return hf_candidates(location, image_column=image_column, **options)
    if location.is_dir():
        if options.pop("task", ""):
            raise IngestError(f"{location}: a task kind applies to manifests and datasets, not to a folder of images")
        if receipts.is_receipts_folder(location):
            return receipts.receipt_candidates(location, **options)
        return folder_candidates(location, **options)
    raise IngestError(f"{location} is neither a folder, a .jsonl/.csv manifest, a COCO .json, a YOLO .yaml, "
                      "nor a dataset")
