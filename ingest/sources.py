"""Ingestion: read image collections into the store, recording a reason for every file refused.

Sources:
- a folder, walked recursively;
- a manifest (JSONL or CSV) of paths relative to the manifest's folder, each with optional supplied
  annotations, source and license (see `SuppliedAnnotations`);
- a Hugging Face dataset saved with `save_to_disk`, or parquet files, with an image column.

A row that declares a task kind (a `task` column, or `task=` for the whole source) is an annotation for
the `reform` generator: its other columns are kept with the image under `annotations.reform`, as given
(class-label columns as their names), and rows that share an image add their annotations to it.
"""

from __future__ import annotations

from benchsmith.errors import BenchsmithError

import csv
import errno
import io
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from benchsmith.images import Accepted, Rejected, inspect_image
from benchsmith import runner
from benchsmith.records import Image, Verdict, stable_hash
from benchsmith.settings import IngestSettings
from benchsmith.store import Store

MANIFEST_SUFFIXES = (".jsonl", ".csv")
HF_SUFFIXES = (".parquet",)


class IngestError(BenchsmithError, ValueError):
    """The source as a whole cannot be read (not one bad file: those are recorded and skipped)."""


# ---------------------------------------------------------------------------------------------------
# Supplied annotations: the manifest format, checked and normalised to unit coordinates at ingest.

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


MAX_LABEL_CHARS = 200
MAX_CAPTION_CHARS = 2000
_MARKUP = re.compile(r"<\s*[A-Za-z/!][^>]*>")


def _checked_text(value: str, what: str, limit: int) -> str:
    """Every supplied text that can become question text (labels, attributes, tags, captions, OCR lines,
    a task row's answers) ends up in prompts, in the review UI and in the published dataset: refuse
    what cannot be meant."""
    value = value.strip()
    if not value:
        raise ValueError(f"{what} is empty")
    if len(value) > limit:
        raise ValueError(f"{what} is {len(value)} characters; at most {limit}")
    return _unmarked(value, what)


def _unmarked(value: str, what: str) -> str:
    if _MARKUP.search(value):
        raise ValueError(f"{what} contains markup (HTML tags)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid UTF-8 text") from None
    return value


def _unmarked_fields(value: Any, where: str) -> None:
    """A task row's columns are kept as they are, any of them may be read as a question, an answer or a
    label (data/reform_tasks.yaml), and an empty one may mean no answer: refuse only markup in them."""
    if isinstance(value, str):
        _unmarked(value, where)
    elif isinstance(value, dict):
        for key, inner in value.items():
            _unmarked_fields(inner, f"{where}.{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            _unmarked_fields(inner, f"{where}[{index}]")


class SuppliedObject(_Strict):
    """An object: `label` plus one of `box` (normalised xyxy), `box_px` (pixel xyxy) or `bbox` (COCO
    pixel xywh); optional `attributes` such as {"colour": "red"} and `score`."""

    label: str
    box: tuple[float, float, float, float] | None = None
    box_px: tuple[float, float, float, float] | None = None
    bbox: tuple[float, float, float, float] | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    score: float | None = None

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        return _checked_text(value, "label", MAX_LABEL_CHARS)

    @field_validator("attributes")
    @classmethod
    def _attributes(cls, values: dict[str, str]) -> dict[str, str]:
        return {_checked_text(key, "attribute name", MAX_LABEL_CHARS):
                _checked_text(value, f"attribute {key!r}", MAX_LABEL_CHARS) for key, value in values.items()}

    @model_validator(mode="after")
    def _one_box(self) -> SuppliedObject:
        if sum(b is not None for b in (self.box, self.box_px, self.bbox)) != 1:
            raise ValueError("give exactly one of box, box_px, bbox")
        return self


class SuppliedText(_Strict):
    """A text line: `text` plus `box` (normalised xyxy), `box_px`, or `quad` (4 normalised points)."""

    text: str
    box: tuple[float, float, float, float] | None = None
    box_px: tuple[float, float, float, float] | None = None
    quad: tuple[tuple[float, float], tuple[float, float], tuple[float, float], tuple[float, float]] | None = None
    score: float | None = None

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        return _checked_text(value, "ocr text", MAX_CAPTION_CHARS)


class SuppliedAnnotations(_Strict):
    captions: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    objects: list[SuppliedObject] = Field(default_factory=list)
    ocr: list[SuppliedText] = Field(default_factory=list)
    truth: dict[str, Any] = Field(default_factory=dict)  # exact ground truth (oracle scenes), kept as is
    reform: list[dict[str, Any]] = Field(default_factory=list)  # task rows for the reform generator, kept as is

    @field_validator("captions")
    @classmethod
    def _captions(cls, values: list[str]) -> list[str]:
        return [_checked_text(v, "caption", MAX_CAPTION_CHARS) for v in values]

    @field_validator("tags")
    @classmethod
    def _tags(cls, values: list[str]) -> list[str]:
        return [_checked_text(v, "tag", MAX_LABEL_CHARS) for v in values]

    @field_validator("reform")
    @classmethod
    def _reform(cls, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for record in records:
            for column, value in record.get("fields", {}).items():
                _unmarked_fields(value, f"{record.get('task')} column {column}")
        return records


def _unit(value: float, size: int) -> float:
    return round(min(max(value / size, 0.0), 1.0), 6)


class OutsideImage(ValueError):
    """A supplied box that covers no part of the image once clipped to it: it cannot describe what is seen."""


def _unit_box(box, box_px, bbox, width: int, height: int) -> list[float] | None:
    if box is not None:
        x1, y1, x2, y2 = box
        if not all(-1e-6 <= v <= 1 + 1e-6 for v in box):
            raise ValueError(f"box {list(box)} is not normalised to [0, 1]; use box_px for pixels")
    elif box_px is not None:
        x1, y1, x2, y2 = (_unit(box_px[0], width), _unit(box_px[1], height), _unit(box_px[2], width),
                          _unit(box_px[3], height))
    elif bbox is not None:
        x, y, w, h = bbox
        x1, y1, x2, y2 = _unit(x, width), _unit(y, height), _unit(x + w, width), _unit(y + h, height)
    else:
        return None
    if x2 < x1 or y2 < y1:
        raise ValueError(f"box has x2<x1 or y2<y1: {[x1, y1, x2, y2]}")
    if x2 <= x1 or y2 <= y1:
        given = list(box if box is not None else box_px if box_px is not None else bbox)
        raise OutsideImage(f"box {given} has no area inside the {width}x{height} image")
    return [round(v, 6) for v in (x1, y1, x2, y2)]


def normalise_annotations(raw: dict[str, Any], width: int, height: int) -> dict[str, Any]:
    """Validate supplied annotations and express every box in unit coordinates. Raises ValueError.

    Objects and text lines whose box lies wholly outside the image are not kept: each goes to
    `dropped` with its reason, so no question is ever asked about something the image does not show."""
    if isinstance(raw.get("captions"), str):
        raw = raw | {"captions": [raw["captions"]]}
    try:
        parsed = SuppliedAnnotations.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    objects, dropped = [], []
    for o in parsed.objects:
        try:
            box = _unit_box(o.box, o.box_px, o.bbox, width, height)
        except OutsideImage as exc:
            dropped.append({"kind": "object", "label": o.label, "reason": str(exc)})
            continue
        objects.append({"label": o.label, "box": box, "attributes": o.attributes}
                       | ({"score": o.score} if o.score is not None else {}))
    ocr = []
    for line in parsed.ocr:
        if line.quad is not None:
            quad = [list(p) for p in line.quad]
        else:
            try:
                box = _unit_box(line.box, line.box_px, None, width, height)
            except OutsideImage as exc:
                dropped.append({"kind": "ocr", "text": line.text, "reason": str(exc)})
                continue
            if box is None:
                raise ValueError(f"ocr line {line.text!r} needs box, box_px or quad")
            x1, y1, x2, y2 = box
            quad = [[x1, y1], [x2, y1], [x2, y2], [x1, y2]]
        ocr.append({"text": line.text, "quad": quad} | ({"score": line.score} if line.score is not None else {}))
    out: dict[str, Any] = {}
    for key, value in (("captions", parsed.captions), ("tags", parsed.tags), ("objects", objects),
                       ("ocr", ocr), ("truth", parsed.truth), ("reform", parsed.reform), ("dropped", dropped)):
        if value:
            out[key] = value
    return out


# ---------------------------------------------------------------------------------------------------
# Sources yield candidates: a name to report, a way to get the bytes, and what came with them.

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
    return _read_bytes(data or b"", max_bytes)


def _read_bytes(data: bytes, max_bytes: int) -> bytes | Rejected:
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
        with io.StringIO(text, newline="") as handle:
            for number, row in enumerate(csv.DictReader(handle), 2):
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
            for key in ANNOTATION_KEYS:
                if key in row:
                    annotations[key] = row[key]
            if "caption" in row:
                annotations.setdefault("captions", [row["caption"]])
        candidate = Candidate(rel, partial(read_regular_file, path), source=row_source,
                              license=str(row.get("license") or license), annotations=annotations,
                              version=stable_hash(row, file_version(path)))
        if not inside(root, path):
            candidate.read = None
            candidate.refused = Rejected("escapes_root", f"path leaves the manifest's folder {root}")
        elif problem := file_problem(path):
            candidate.read = None
            candidate.refused = problem
        yield candidate


def _is_saved_dataset(location: Path) -> bool:
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
    if _is_saved_dataset(location):
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


def candidates_for(location: Path, **options: Any) -> Iterator[Candidate]:
    """Pick the source type from what `location` is."""
    if not location.exists():
        raise IngestError(f"{location} does not exist")
    image_column = options.pop("image_column", None)
    if location.is_file() and location.suffix.lower() in MANIFEST_SUFFIXES:
        return manifest_candidates(location, **options)
    if (location.is_file() and location.suffix.lower() in HF_SUFFIXES) or _is_saved_dataset(location):
        return hf_candidates(location, image_column=image_column, **options)
    if location.is_dir():
        if options.pop("task", ""):
            raise IngestError(f"{location}: a task kind applies to manifests and datasets, not to a folder of images")
        return folder_candidates(location, **options)
    raise IngestError(f"{location} is neither a folder, a .jsonl/.csv manifest, nor a dataset")


# ---------------------------------------------------------------------------------------------------
# The ingest stage.

@dataclass
class IngestReport:
    seen: int = 0
    skipped: int = 0     # examined by an earlier run under the same settings and not changed since: not read
    added: int = 0
    unchanged: int = 0   # read, and already in the store
    annotated: int = 0   # task annotations added to an image that came earlier (rows sharing one image)
    rejected: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)  # supplied boxes outside their image, by kind (object, ocr)

    def summary(self) -> str:
        parts = [f"{self.seen} seen", f"{self.added} added"]
        if self.unchanged or not self.skipped:
            parts.append(f"{self.unchanged} already in the store")
        if self.skipped:
            parts.append(f"{self.skipped} unchanged since the last ingest (not read again)")
        if self.annotated:
            parts.append(f"{self.annotated} task annotations added to images seen before")
        if self.rejected:
            parts.append(f"{sum(self.rejected.values())} refused (" +
                         ", ".join(f"{n} {rule}" for rule, n in sorted(self.rejected.items())) + ")")
        if self.dropped:
            parts.append(f"{sum(self.dropped.values())} supplied boxes dropped with no area inside their image (" +
                         ", ".join(f"{n} {kind}" for kind, n in sorted(self.dropped.items())) +
                         "; each under its image's annotations.dropped)")
        return ", ".join(parts)


def _die_with_parent(parent: int) -> None:
    """Worker initializer: end this worker when the ingest process dies, even by SIGKILL (Linux), instead of
    living on as an orphan holding memory."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pool's own broken-pipe handling is all there is
        pass
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)


def _inspect(args: tuple[bytes, int, int]) -> Accepted | Rejected:
    data, min_side, max_pixels = args
    return inspect_image(data, min_side=min_side, max_pixels=max_pixels)


def _read(candidate: Candidate, max_bytes: int) -> bytes | Rejected:
    try:
        return candidate.read(max_bytes)
    except IsADirectoryError:
        return Rejected("not_a_file", "is a directory")
    except PermissionError:
        return Rejected("unreadable", "permission denied")
    except OSError as exc:
        return Rejected("unreadable", f"cannot be read: {exc.strerror or exc}")


def _write_atomic(path: Path, data: bytes) -> None:
    if path.exists() and path.stat().st_size == len(data):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class IngestStage:
    """The candidates of one source as a runner stage: ledger stage `ingest`, config key = the checks'
    limits, subject = the source label, the candidate's name and its version. A file examined once is not
    read again until it changes (or the limits do); an accepted image's id is the sha256 of its bytes, so
    re-reading adds nothing twice."""

    name = "ingest"

    def __init__(self, media_dir: Path, candidates: Iterable[Candidate], settings: IngestSettings, *, label: str,
                 workers: int = 1) -> None:
        self.media_dir = media_dir
        self.candidates = list(candidates)
        self.settings = settings
        self.label = printable_name(label)
        self.workers = workers
        self.pool: ProcessPoolExecutor | None = None
        self.report = IngestReport(seen=len(self.candidates))

    def __enter__(self) -> "IngestStage":
        return self

    def __exit__(self, *exc) -> None:
        if self.pool:
            self.pool.shutdown()
            self.pool = None

    def config_key(self) -> str:
        s = self.settings
        return runner.config_key(s.min_side, s.max_pixels, s.max_bytes)

    def units(self, store) -> list[Candidate]:
        return self.candidates

    def subject(self, candidate: Candidate) -> str:
        return stable_hash(self.label, printable_name(candidate.name), candidate.version, length=32)

    def process(self, batch: Sequence[Candidate]) -> Iterator[tuple[Candidate, Accepted | Rejected]]:
        """Read and check each candidate (in worker processes with `workers` > 1)."""
        if self.workers > 1 and self.pool is None:
            self.pool = ProcessPoolExecutor(self.workers, initializer=_die_with_parent, initargs=(os.getpid(),))
        to_inspect: list[tuple[Candidate, bytes]] = []
        for candidate in batch:
            if printable_name(candidate.name) != candidate.name:  # the store keeps names as UTF-8 text
                yield candidate, Rejected("bad_name", f"the file name {printable_name(candidate.name)} is not valid "
                                                      "UTF-8; rename it (e.g. convmv -f latin1 -t utf8)")
                continue
            if candidate.refused:
                yield candidate, candidate.refused
                continue
            data = _read(candidate, self.settings.max_bytes)
            if isinstance(data, Rejected):
                yield candidate, data
            else:
                to_inspect.append((candidate, data))
        s = self.settings
        args = [(data, s.min_side, s.max_pixels) for _, data in to_inspect]
        results = self.pool.map(_inspect, args, chunksize=16) if self.pool else map(_inspect, args)
        for (candidate, _), result in zip(to_inspect, results):
            yield candidate, result

    def commit(self, store, pairs: list[tuple[Candidate, Accepted | Rejected]],
               stage_report: runner.StageReport) -> list[runner.Outcome]:
        """Store the accepted images (media file, item) and a verdict for each refused candidate."""
        report = self.report
        accepted_ids = sorted({o.id for _, o in pairs if isinstance(o, Accepted)})
        stored_names = ({i.id: i.original_name for i in store.get_items(accepted_ids, status=None)}
                        if accepted_ids else {})
        new_items: dict[str, Image] = {}  # duplicates within this group; earlier groups are in the store
        verdicts: list[Verdict] = []
        outcomes: list[runner.Outcome] = []
        more_records: dict[str, list[dict]] = {}   # stored image id -> task annotations of later rows
        for candidate, outcome in pairs:
            subject, name = self.subject(candidate), printable_name(candidate.name)
            records = candidate.annotations.get("reform") or []
            if isinstance(outcome, Accepted) and records and (outcome.id in new_items or outcome.id in stored_names):
                # another annotation of an image already here (VQA: several questions per image): add it there
                earlier = new_items.get(outcome.id)
                target = earlier.annotations.setdefault("reform", []) if earlier else more_records.setdefault(outcome.id, [])
                fresh = [r for r in records if r not in target]
                target.extend(fresh)
                if earlier:  # the store counts what it adds to stored images
                    report.annotated += len(fresh)
                else:
                    report.unchanged += 1
                outcomes.append(runner.Outcome(subject, "done", details={"name": name, "item": outcome.id}))
                continue
            if isinstance(outcome, Accepted):
                first = new_items.get(outcome.id)
                first_name = first.original_name if first else stored_names.get(outcome.id)
                if first_name is not None and first_name != name:
                    outcome = Rejected("duplicate", f"same bytes as {first_name}", outcome.id)
                elif first_name is not None:
                    report.unchanged += 1
                    outcomes.append(runner.Outcome(subject, "done", details={"name": name, "item": outcome.id}))
                    continue
            if isinstance(outcome, Accepted):
                try:
                    annotations = normalise_annotations(candidate.annotations, outcome.width, outcome.height)
                except ValueError as exc:
                    outcome = Rejected("bad_annotations", str(exc))
            if isinstance(outcome, Rejected):
                report.rejected[outcome.rule] += 1
                verdicts.append(Verdict(subject_id=f"{self.label}:{name}", subject_kind="input", stage="ingest",
                                        rule=outcome.rule, passed=False, reason=outcome.reason,
                                        details={"sha256": outcome.id} if outcome.id else {}))
                outcomes.append(runner.Outcome(subject, "failed", outcome.rule, {"name": name}))
                continue
            report.dropped.update(d["kind"] for d in annotations.get("dropped", []))
            relative = f"{outcome.id[:2]}/{outcome.id}{outcome.extension}"
            _write_atomic(self.media_dir / relative, outcome.data)
            new_items[outcome.id] = Image(id=outcome.id, path=relative, width=outcome.width, height=outcome.height,
                                          source=candidate.source, license=candidate.license, original_name=name,
                                          annotations=annotations)
            outcomes.append(runner.Outcome(subject, "done", details={"name": name, "item": outcome.id}))
        report.added += store.add_items(list(new_items.values()))
        if more_records:
            report.annotated += store.add_item_annotations("reform", more_records)
        if verdicts:
            store.add_verdicts(verdicts)
        return outcomes


def ingest(store: Store, media_dir: Path, candidates: Iterable[Candidate], settings: IngestSettings, *,
           label: str, workers: int = 1, show_progress: bool = False) -> IngestReport:
    """Check, normalise and store every candidate not examined before; refuse bad ones with a verdict each.

    `label` names the source: it prefixes the names in refusal verdicts, so they can be traced back to it,
    and keeps its ledger subjects apart from other sources'. Work is committed in batches of
    `settings.batch_size`: a crash loses at most the batch in flight, and a rerun reads only what is new
    or changed.
    """
    from benchsmith.console import progress_bar

    with IngestStage(media_dir, candidates, settings, label=label, workers=workers) as stage:
        todo = runner.pending(stage, store)
        stage.report.skipped = stage.report.seen - len(todo)
        if todo:
            with progress_bar(f"ingesting {Path(label).name}", len(todo)) if show_progress else nullcontext() as advance:
                runner.run(stage, store, window=settings.batch_size, units=todo, progress=advance)
    return stage.report


def ingest_location(store: Store, settings, location: Path, *, source: str = "", license: str = "",
                    image_column: str | None = None, workers: int = 1, task: str = "",
                    show_progress: bool = False) -> IngestReport:
    """Ingest one folder, manifest or dataset: the one way both `benchsmith ingest` and the build flow do it."""
    found = candidates_for(Path(location), source=source, license=license, image_column=image_column, task=task)
    return ingest(store, settings.media_dir, found, settings.ingest, label=str(location), workers=workers,
                  show_progress=show_progress)


def ingest_sources(store: Store, settings, locations: list[Path], *, source: str = "", license: str = "",
                   image_column: str | None = None, workers: int = 1, task: str = "") -> list[tuple[Path, IngestReport]]:
    """Ingest each location with a progress bar, then judge caption richness of what came in."""
    from ingest import richness

    reports = [(Path(location), ingest_location(store, settings, Path(location), source=source, license=license,
                                                image_column=image_column, workers=workers, task=task,
                                                show_progress=True))
               for location in locations]
    richness.apply(store, settings.ingest.richness)
    return reports
