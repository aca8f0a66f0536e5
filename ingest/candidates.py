"""Candidate discovery: each source yields candidates, a name to report, a way to get the bytes, and what
came with them. Nothing is read or judged here beyond what the file's metadata says.

Sources:
- a folder, walked recursively;
- a manifest (JSONL or CSV) of paths relative to the manifest's folder, each with optional supplied
  annotations, source and license (see `ingest.annotations.SuppliedAnnotations`);
- a Hugging Face dataset saved with `save_to_disk`, or parquet files, with an image column;
- (in modules of their own, on these primitives) a COCO annotation .json or a YOLO dataset .yaml
  (`ingest.detection`) and a folder of scanned receipts in the ICDAR SROIE layout (`ingest.receipts`).
  `ingest.sources.candidates_for` picks one from what a location is.

A row that declares a task kind (a `task` column, or `task=` for the whole source) is an annotation for
the `reform` generator: its other columns are kept with the image under `annotations.reform`, as given
(class-label columns as their names), and rows that share an image add their annotations to it.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from benchsmith.errors import BenchsmithError
from benchsmith.images import Rejected
from benchsmith.records import stable_hash

MANIFEST_SUFFIXES = (".jsonl", ".csv")
HF_SUFFIXES = (".parquet",)


class IngestError(BenchsmithError, ValueError):
    """The source as a whole cannot be read (not one bad file: those are recorded and skipped)."""


@dataclass
class Candidate:
    name: str
    read: Callable[[int], bytes | Rejected] | None  # given the size limit; None when refused before reading
    source: str = ""
    license: str = ""
    annotations: dict[str, Any] = field(default_factory=dict)
    refused: Rejected | None = None
    version: str = ""  # changes when the input may have changed (a file's size and times; a dataset's fingerprint)


def file_version(path: Path) -> str:
    """Size and modification/change times: a file that keeps them has not been rewritten, renamed over or
    had its permissions changed, so its earlier outcome stands. Empty when the file cannot be examined."""
    try:
        info = path.stat()
    except OSError:
        return ""
    return f"{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"


_FILE_KINDS = ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO (named pipe)"), (stat.S_ISCHR, "character device"),
               (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"))


def file_problem(path: Path, max_bytes: int | None = None) -> Rejected | None:
    """Why `path` must not be opened, judged from its metadata alone, or None. Opening a FIFO or a
    device can block forever or never end, and a huge file would be read whole, so this comes first."""
    try:
        info = path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Rejected("unreadable", "symlink loop: the link never reaches a file")
        if exc.errno == errno.ENOENT:
            return Rejected("missing", "no such file")
        return Rejected("unreadable", f"cannot be examined: {exc.strerror or exc}")
    return _kind_problem(info, max_bytes)


def _kind_problem(info: os.stat_result, max_bytes: int | None) -> Rejected | None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(info.st_mode)), "special file")
        return Rejected("not_a_file", f"is a {kind}, not a regular file")
    if max_bytes is not None and info.st_size > max_bytes:
        return Rejected("too_large", f"{info.st_size:,} bytes is more than ingest.max_bytes ({max_bytes:,})")
    return None


def read_regular_file(path: Path, max_bytes: int) -> bytes | Rejected:
    """The bytes of a regular file no larger than `max_bytes`, or why not. The file is checked again
    once open (non-blocking), so a file swapped for a FIFO between the checks cannot hang the run."""
    problem = file_problem(path, max_bytes)
    if problem:
        return problem
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        problem = _kind_problem(os.fstat(fd), max_bytes)
        if problem:
            return problem
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        return Rejected("too_large", f"more than ingest.max_bytes ({max_bytes:,}) bytes")
    return data


def _read_row_image(dataset, root: Path, index: int, column: str, max_bytes: int) -> bytes | Rejected:
    cell = dataset[index][column] or {}
    data = cell.get("bytes") if isinstance(cell, dict) else None
    if data is None and isinstance(cell, dict) and cell.get("path"):
        # a cell that only names a file is a path like a manifest's: relative to the dataset's folder and
        # never outside it (a downloaded dataset must not pull the user's own files into a benchmark)
        path = root / cell["path"]
        if not inside(root, path):
            return Rejected("escapes_root", f"path leaves the dataset's folder {root}")
        return read_regular_file(path, max_bytes)  # checked like any file: kind, size
    data = data or b""
    if len(data) > max_bytes:
        return Rejected("too_large", f"{len(data):,} bytes is more than ingest.max_bytes ({max_bytes:,})")
    return data


def inside(root: Path, path: Path) -> bool:
    """Whether `path`, links resolved, lies under `root`. A link loop resolves to itself (never raises)."""
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
        return True
    except ValueError:
        return False


def printable_name(name: str) -> str:
    """`name` with bytes that are not UTF-8 (kept by Python as surrogates) shown as \\xNN escapes."""
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that did not come from a file name's bytes
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


def folder_candidates(root: Path, *, source: str = "", license: str = "") -> Iterator[Candidate]:
    root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            if filename.startswith("."):
                continue
            path = Path(dirpath) / filename
            name = str(path.relative_to(root))
            if path.suffix.lower() in MANIFEST_SUFFIXES and path.parent == root:
                continue  # a manifest beside the images describes them; it is not an image itself
            if path.is_symlink() and not inside(root, path):
                yield Candidate(name, None, refused=Rejected("escapes_root", "symlink points outside the folder"))
                continue
            yield Candidate(name, partial(read_regular_file, path), source=source or root.name, license=license,
                            version=file_version(path))


def _manifest_rows(manifest: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line number, row) pairs; a row that cannot be parsed comes back as an error string."""
    if manifest.suffix.lower() == ".jsonl":
        with manifest.open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                try:
                    line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    yield number, (f"line {number} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                                   f"{exc.start + 1}); save the manifest as UTF-8")
                    continue
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    yield number, row if isinstance(row, dict) else f"line {number} is not a JSON object"
                except json.JSONDecodeError as exc:
                    yield number, f"line {number} is not valid JSON: {exc.msg}"
    else:
        data = manifest.read_bytes()
        try:
            text = data.decode("utf-8-sig")  # Excel writes a byte-order mark
        except UnicodeDecodeError as exc:
            line = data[:exc.start].count(b"\n") + 1
            raise IngestError(f"{manifest} line {line} is not UTF-8 text (byte 0x{data[exc.start]:02x}); "
                              "save the manifest as UTF-8 (CSV UTF-8 in Excel)") from None
        for number, row in enumerate(csv.DictReader(io.StringIO(text, newline="")), 2):
            row = {k: v for k, v in row.items() if k and v not in (None, "")}
            if "annotations" in row:
                try:
                    row["annotations"] = json.loads(row["annotations"])
                except json.JSONDecodeError as exc:
                    yield number, f"row {number}: annotations column is not JSON: {exc.msg}"
                    continue
            if "caption" in row:
                row.setdefault("annotations", {}).setdefault("captions", [row.pop("caption")])
            yield number, row


ANNOTATION_KEYS = ("captions", "tags", "objects", "ocr", "truth")
ROW_KEYS = ("path", "file_name", "image", "source", "license", "task", "annotations")  # never a task's field


def _plain(value: Any) -> Any:
    """`value` as JSON data; what JSON cannot hold (bytes, images) becomes None."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return _plain(value.tolist())
    return None


def task_annotations(row: dict[str, Any], task: str, name: str, dataset: str) -> dict[str, Any]:
    """A task row's annotations: its columns, as they are, become one record for the reform generator
    (with the row's name and dataset, for provenance); supplied annotations for the other stages come only
    from its `annotations` column."""
    fields = {k: _plain(v) for k, v in row.items() if k not in ROW_KEYS and _plain(v) is not None}
    record = {"task": task, "dataset": dataset, "row": name, "fields": fields}
    return dict(row.get("annotations") or {}) | {"reform": [record]}


def manifest_candidates(manifest: Path, *, source: str = "", license: str = "", task: str = "") -> Iterator[Candidate]:
    """Entries of a manifest. Each row has `path` (relative to the manifest's folder) and optionally
    `source`, `license`, and annotations either at top level or under `annotations`; a row with a `task`
    (or every row, given `task`) is a reform annotation (see `task_annotations`)."""
    root = manifest.parent.resolve()
    for number, row in _manifest_rows(manifest):
        if isinstance(row, str):
            yield Candidate(f"{manifest.name}:{number}", None, refused=Rejected("bad_manifest_row", row))
            continue
        if "images" in row:  # an image set (`set_rows`), built once its images are in
            continue
        rel = row.get("path") or row.get("file_name") or row.get("image")
        if not isinstance(rel, str) or not rel:
            yield Candidate(f"{manifest.name}:{number}", None,
                            refused=Rejected("bad_manifest_row", f"row {number} has no 'path'"))
            continue
        path = (root / rel) if not Path(rel).is_absolute() else Path(rel)
        annotations = dict(row.get("annotations") or {})
        row_source = str(row.get("source") or source or manifest.stem)
        if row.get("task") or task:
            annotations = task_annotations(row, str(row.get("task") or task), f"{manifest.name}:{number}", row_source)
        else:
            annotations |= {key: row[key] for key in ANNOTATION_KEYS if key in row}
            if "caption" in row:
                annotations.setdefault("captions", [row["caption"]])
        refused = (file_problem(path) if inside(root, path)
                   else Rejected("escapes_root", f"path leaves the manifest's folder {root}"))
        yield Candidate(rel, None if refused else partial(read_regular_file, path), source=row_source,
                        license=str(row.get("license") or license), annotations=annotations, refused=refused,
                        version=stable_hash(row, file_version(path)))


def set_rows(manifest: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows of a JSONL manifest that list an image set (`images`: its images' paths in order), with
    their line numbers."""
    if manifest.suffix.lower() == ".jsonl":
        yield from ((n, row) for n, row in _manifest_rows(manifest) if isinstance(row, dict) and "images" in row)


def is_saved_dataset(location: Path) -> bool:
    return location.is_dir() and any((location / name).exists()
                                     for name in ("dataset_info.json", "state.json", "dataset_dict.json"))


def hf_candidates(location: Path, *, image_column: str | None = None, source: str = "",
                  license: str = "", task: str = "") -> Iterator[Candidate]:
    """Rows of a Hugging Face dataset saved on disk (`save_to_disk`) or of parquet files."""
    try:
        import datasets
    except ImportError:
        raise IngestError("reading Hugging Face datasets needs the 'publish' extra: "
                          "`make install` (locks/install.txt)") from None
    if is_saved_dataset(location):
        dataset = datasets.load_from_disk(str(location))
    else:
        files = [str(location)] if location.is_file() else sorted(map(str, location.rglob("*.parquet")))
        if not files:
            raise IngestError(f"no dataset or parquet files at {location}")
        dataset = datasets.load_dataset("parquet", data_files=files, split="train")
    if isinstance(dataset, datasets.DatasetDict):
        dataset = datasets.concatenate_datasets(list(dataset.values()))
    if image_column is None:
        image_column = next((name for name, feature in dataset.features.items()
                             if isinstance(feature, datasets.Image)), None)
    if image_column is None or image_column not in dataset.column_names:
        raise IngestError(f"no image column in {location}; columns: {', '.join(dataset.column_names)} "
                          "(name one with --image-column)")
    dataset = dataset.cast_column(image_column, datasets.Image(decode=False))
    root = (location if location.is_dir() else location.parent).resolve()
    others = dataset.remove_columns([image_column])  # rows without their image bytes, for the metadata
    class_labels = {name: feature for name, feature in others.features.items()
                    if isinstance(feature, datasets.ClassLabel)}
    # a dataset of images alone leaves no columns, and a table without columns has no rows to iterate
    rows = iter(others) if others.column_names else ({} for _ in range(len(dataset)))
    for index, row in enumerate(rows):
        # the image is read from the memory-mapped table only when its batch is ingested, so listing a
        # source of any size holds no image bytes
        read = partial(_read_row_image, dataset, root, index, image_column)
        name = f"{location.name}[{index}]"
        if row.get("task") or task:
            row |= {k: feature.int2str(row[k]) for k, feature in class_labels.items()
                    if isinstance(row.get(k), int) and 0 <= row[k] < feature.num_classes}
            annotations = task_annotations(row, str(row.get("task") or task), name,
                                           str(row.get("source") or source or location.name))
        else:
            annotations = {k: row[k] for k in ANNOTATION_KEYS if row.get(k) is not None}
            if row.get("caption"):
                annotations.setdefault("captions", [row["caption"]])
        yield Candidate(name, read, source=str(row.get("source") or source or location.name),
                        license=str(row.get("license") or license), annotations=annotations,
                        version=f"{dataset._fingerprint}:{stable_hash(row)}")
