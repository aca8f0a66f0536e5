"""The data files of a release: parquet shards per dimension in the SEED-Bench / lmms-eval schema, and
the same rows as a VLMEvalKit multiple-choice TSV.

Rows are written shard by shard, so memory holds one shard's images at a time; each image goes into
both formats from one encoding.
"""

from __future__ import annotations

import base64
import csv
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import datasets

from publish.entries import Entry
from publish.settings import PublishSettings
from benchsmith.records import LETTERS, sha256_bytes

FEATURES = datasets.Features({
    "question_id": datasets.Value("string"),
    "question": datasets.Value("string"),
    "choice_a": datasets.Value("string"),
    "choice_b": datasets.Value("string"),
    "choice_c": datasets.Value("string"),
    "choice_d": datasets.Value("string"),
    "answer": datasets.Value("string"),
    "image": datasets.List(datasets.Image()),
    "data_type": datasets.Value("string"),
    "question_type_id": datasets.Value("int64"),
    "category": datasets.Value("string"),
    "data_id": datasets.Value("string"),
    "source": datasets.Value("string"),
    "generator": datasets.Value("string"),
    "model": datasets.Value("string"),
    "agreement": datasets.Value("float64"),
    "annotators": datasets.Value("int64"),
})
TSV_COLUMNS = ["index", "image", "image_path", "question", *LETTERS, "answer", "category", "question_id", "data_type"]
PNG = b"\x89PNG"


def _fields(entry: Entry) -> dict[str, Any]:
    return vars(entry) | {f"choice_{letter.lower()}": choice for letter, choice in zip(LETTERS, entry.choices)}


def _one_or_list(values: list[str]) -> str:
    """One value as it is, several as a JSON list (VLMEvalKit's `toliststr` evaluates a bracketed cell)."""
    return values[0] if len(values) == 1 else json.dumps(values)


class TsvWriter:
    """VLMEvalKit's image MCQ TSV. A question with several images (an image set, a video's frames) carries
    them as a JSON list in `image` and their file names as a list in `image_path`, as VLMEvalKit's
    multi-image sets do: its `dump_image` saves each list item under its name. Media shown before are
    written once and then referenced by the index of the row that holds them."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("w", encoding="utf-8", newline="")
        self._csv = csv.writer(self._file, delimiter="\t", lineterminator="\n")
        self._csv.writerow(TSV_COLUMNS)
        self._first_row_of: dict[tuple[str, ...], int] = {}
        self.rows = 0

    def add(self, entry: Entry, frames: list[bytes]) -> None:
        # named by content: VLMEvalKit reuses a file already under its name, so a stale one must never match
        names = [f"{sha256_bytes(data)[:16]}.{'png' if data.startswith(PNG) else 'jpg'}" for data in frames]
        first = self._first_row_of.setdefault(entry.media, self.rows)
        image = str(first) if first < self.rows else _one_or_list([base64.b64encode(d).decode("ascii") for d in frames])
        self._csv.writerow([self.rows, image, _one_or_list(names), entry.question, *entry.choices, entry.answer,
                            entry.category, entry.question_id, entry.data_type])
        self.rows += 1

    def close(self) -> None:
        self._file.close()


def uncompressed_bytes(folder: Path, paths: list[str]) -> int:
    """A split's size as `datasets` counts it (`num_bytes`), read from the shards' parquet metadata."""
    import pyarrow.parquet as pq

    metas = [pq.ParquetFile(folder / path).metadata for path in paths]
    return sum(meta.row_group(i).total_byte_size for meta in metas for i in range(meta.num_row_groups))


def write_data(by_config: dict[str, list[Entry]], folder: Path, encoded: Callable[[str], bytes],
               settings: PublishSettings, tsv_path: Path,
               progress: Callable[[int], None] = lambda n: None) -> dict[str, list[str]]:
    """Write every config's shards and the TSV; return config -> shard paths relative to `folder`.
    `encoded(media_path)` gives the clean bytes of one stored image or frame."""
    shards: dict[str, list[str]] = {}
    tsv = TsvWriter(tsv_path)
    bars_were_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # our own bar counts questions; one per shard would be noise

    def written(chunk: Sequence[Entry], images: list[list[bytes]]) -> None:
        for entry, frames in zip(chunk, images):
            tsv.add(entry, frames)
        progress(len(chunk))
    try:
        for config, entries in by_config.items():
            shards[config] = write_shards(
                entries, folder, lambda shard, n, config=config: f"data/{config}/{settings.split}-{shard:05d}-of-{n:05d}.parquet",
                _fields, FEATURES, settings.shard_rows, encoded, written)
    finally:
        tsv.close()
        if bars_were_on:
            datasets.enable_progress_bars()
    return shards


def write_shards(entries: Sequence[Any], folder: Path, path_of: Callable[[int, int], str],
                 fields: Callable[[Any], dict[str, Any]], features: datasets.Features,
                 shard_rows: int, encoded: Callable[[str], bytes],
                 written: Callable[[Sequence[Any], list[list[bytes]]], None] = lambda chunk, images: None) -> list[str]:
    """Write `entries` as parquet shards of `shard_rows` rows: each feature's column from `fields(entry)`,
    and `image` from the entry's media read through `encoded`; `written(chunk, images)` after each shard.
    Returns the shards' paths (`path_of(shard, n_shards)`), relative to `folder`. One shard's images are in
    memory at a time."""
    n_shards = -(-len(entries) // shard_rows)
    paths = []
    for shard in range(n_shards):
        chunk = entries[shard * shard_rows:(shard + 1) * shard_rows]
        images = [[encoded(relative) for relative in entry.media] for entry in chunk]
        rows = [fields(entry) for entry in chunk]
        columns = {name: [[{"bytes": data, "path": None} for data in frames] for frames in images] if name == "image"
                   else [row[name] for row in rows] for name in features}
        relative_path = path_of(shard, n_shards)
        (folder / relative_path).parent.mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_dict(columns, features=features).to_parquet(str(folder / relative_path))
        written(chunk, images)
        paths.append(relative_path)
    return paths
