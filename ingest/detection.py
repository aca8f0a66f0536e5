"""Detection datasets as ingest sources: a COCO instances JSON (with its captions JSON) and a YOLO dataset
(its data YAML). Each yields the same candidates as a manifest row: the image's path under its root, its
objects (and captions), source and licence; what cannot become an object is listed under `dropped` with
a rule and a reason, so every box the dataset holds is accounted for.

- COCO: `images[]` (`id`, `file_name` relative to the images folder, `license`), `annotations[]` (`bbox`
  pixel xywh, `category_id`, `iscrowd`; or `caption`), `categories[]`, `licenses[]`. A crowd region
  becomes an object marked `crowd`; an annotation with a segmentation and no box, or a category id the
  file does not list, is dropped with its reason. `captions_<split>.json` beside `instances_<split>.json`
  adds its captions by image id; given a task kind of the `captions` method (`--task matching`), they
  are also the image's annotation for the reform generator's caption-matching questions.
- YOLO (Ultralytics): `names` (a list, or a map from class id), and `train`/`val`/`test`, each a folder
  of images or a .txt list of image paths (`./x` relative to the list's folder), relative to `path`
  (itself relative to the YAML's folder). The
  labels of `.../images/<rest>.jpg` are in `.../labels/<rest>.txt` or, failing that, in
  `labels/<split folder>/<rest>.txt` beside the YAML; a line is `class cx cy w h` in unit coordinates, or a
  polygon `class x1 y1 x2 y2 ...`, which gives its bounding box. An image without a label file has no
  objects (YOLO's background images).
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from benchsmith.images import Rejected
from benchsmith.records import stable_hash
from ingest.candidates import (Candidate, IngestError, file_problem, file_version, inside, read_regular_file,
                               task_annotations)

COCO_SUFFIXES = (".json",)
YOLO_SUFFIXES = (".yaml", ".yml")
YOLO_SPLITS = ("train", "val", "test")
IMAGE_SUFFIXES = (".bmp", ".jpeg", ".jpg", ".mpo", ".png", ".tif", ".tiff", ".webp")  # what Ultralytics reads
UNIT_SLACK = 0.01  # YOLO coordinates this far past 0..1 are rounding, clipped; further is a bad box


def _dropped(rule: str, label: str | None, reason: str) -> dict[str, Any]:
    return {"kind": "object", "rule": rule, "reason": reason} | ({"label": label} if label else {})


def _candidate(name: str, path: Path, root: Path, root_name: str, annotations: dict[str, Any], *, source: str,
               license: str, version: str) -> Candidate:
    """The image at `path`, refused before reading if it leaves `root` or cannot be opened."""
    refused = (file_problem(path) if inside(root, path)
               else Rejected("escapes_root", f"path leaves the {root_name} {root}"))
    return Candidate(name, None if refused else partial(read_regular_file, path), source=source, license=license,
                     annotations=annotations, refused=refused, version=stable_hash(version, file_version(path)))


# --- COCO -------------------------------------------------------------------------------------------------

def _load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise IngestError(f"{path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise IngestError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except OSError as exc:
        raise IngestError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list) \
            or not isinstance(data.get("annotations"), list):
        raise IngestError(f"{path} is not a COCO annotation file: it needs 'images' and 'annotations' lists")
    return data


def _records(data: dict[str, Any], key: str, path: Path, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """`data[key]` as a list of objects that each have `fields`; anything else is the whole file's error."""
    records = data.get(key) or []
    for number, record in enumerate(records):
        if not isinstance(record, dict) or any(f not in record for f in fields):
            raise IngestError(f"{path}: {key}[{number}] is not an object with {', '.join(fields)}")
    return records


def captions_beside(instances: Path) -> Path | None:
    """`captions_<split>.json` beside `instances_<split>.json`, when it is there."""
    if not instances.name.startswith("instances_"):
        return None
    captions = instances.with_name("captions_" + instances.name.removeprefix("instances_"))
    return captions if captions.is_file() else None


def coco_images_folder(annotations: Path) -> Path:
    """Where a COCO file's images are when no folder is given: `<root>/<split>` beside the `annotations`
    folder of `<root>/annotations/instances_<split>.json` (COCO's own layout), else the file's folder."""
    split = annotations.stem.split("_", 1)[-1]
    beside = annotations.parent.parent / split
    return beside if "_" in annotations.stem and beside.is_dir() else annotations.parent


def _coco_object(annotation: dict[str, Any], labels: dict[Any, str]) -> dict[str, Any]:
    """An object (or a dropped record, marked by its `rule`) for one instance annotation."""
    category = annotation.get("category_id")
    label = labels.get(category) if isinstance(category, (int, str)) else None
    where = f"annotation {annotation.get('id', '?')}"
    if label is None:
        return _dropped("unknown_class", None, f"{where}: category_id {category!r} is not in the file's categories")
    bbox = annotation.get("bbox")
    if not bbox:
        what = "a segmentation only" if annotation.get("segmentation") else "no box"
        return _dropped("no_box", label, f"{where} has {what}: no box to ask about")
    if not (isinstance(bbox, list) and len(bbox) == 4 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                               and math.isfinite(v) for v in bbox)) \
            or bbox[2] < 0 or bbox[3] < 0:
        return _dropped("bad_box", label, f"{where}: bbox {bbox!r} is not [x, y, width, height] in pixels")
    return {"label": label, "bbox": bbox} | ({"crowd": True} if annotation.get("iscrowd") else {})


def coco_candidates(annotations: Path, *, images: Path | None = None, source: str = "", license: str = "",
                    task: str = "") -> Iterator[Candidate]:
    """The images of a COCO annotation file (instances, captions, or both), with their objects, captions and
    licence; `images` is the folder their `file_name`s are relative to (default: `coco_images_folder`).
    With `task` (a kind of the `captions` method), an image's captions are also its reform annotation."""
    data = _load_json(annotations)
    sources = [(annotations, data)]
    if (captions := captions_beside(annotations)) is not None:
        sources.append((captions, _load_json(captions)))
    root = (images or coco_images_folder(annotations)).resolve()
    if not root.is_dir():
        raise IngestError(f"images folder {root} for {annotations} is not a folder; name it with --images")
    labels = {c["id"]: str(c["name"]) for c in _records(data, "categories", annotations, ("id", "name"))
              if isinstance(c["id"], (int, str))}  # any other id names nothing: its boxes are unknown_class
    licences = {entry["id"]: f"{entry.get('name') or ''} {entry.get('url') or ''}".strip()
                for entry in _records(data, "licenses", annotations, ("id",))}
    listed = _records(data, "images", annotations, ("id", "file_name"))
    for image in listed:
        if not isinstance(image["id"], (int, str)):
            raise IngestError(f"{annotations}: image id {image['id']!r} is not a whole number or a string")
    known = {image["id"] for image in listed}
    objects, captions_of = defaultdict(list), defaultdict(list)
    for path, content in sources:
        for number, annotation in enumerate(_records(content, "annotations", path, ("image_id",))):
            if not isinstance(annotation["image_id"], (int, str)) or annotation["image_id"] not in known:
                yield Candidate(f"{path.name}:annotations[{number}]", None, refused=Rejected(
                    "unknown_image", f"image_id {annotation['image_id']!r} is not in {annotations.name}'s images"))
            elif "caption" in annotation:
                captions_of[annotation["image_id"]].append(str(annotation["caption"]))
            else:
                objects[annotation["image_id"]].append(_coco_object(annotation, labels))
    source = source or f"coco-{annotations.stem.removeprefix('instances_')}"
    for image in listed:
        rel = str(image["file_name"])
        found = objects[image["id"]]
        notes = {"objects": [o for o in found if "rule" not in o], "dropped": [o for o in found if "rule" in o],
                 "captions": captions_of[image["id"]]}
        if task and captions_of[image["id"]]:
            notes |= task_annotations({"image_id": image["id"], "captions": captions_of[image["id"]]}, task,
                                      f"{annotations.name}:{image['id']}", source)
        notes = {key: value for key, value in notes.items() if value}
        yield _candidate(rel, root / rel, root, "images folder", notes, source=source,
                         license=licences.get(image.get("license")) or license,
                         version=stable_hash(image, notes, licences.get(image.get("license"))))


# --- YOLO -------------------------------------------------------------------------------------------------

def _load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError:
        raise IngestError(f"{path} is not UTF-8 text; save it as UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise IngestError(f"{path} is not valid YAML: {getattr(exc, 'problem', None) or exc}{where}") from None
    if not isinstance(data, dict) or "names" not in data:
        raise IngestError(f"{path} is not a YOLO dataset file: it has no 'names' (the class names)")
    return data


def yolo_names(data: dict[str, Any], path: Path) -> dict[int, str]:
    names = data["names"]
    if isinstance(names, list):
        names = dict(enumerate(names))
    if not isinstance(names, dict) or not names:
        raise IngestError(f"{path}: 'names' must be a list of class names or a map from class id to name")
    try:
        return {int(k): str(v) for k, v in names.items()}
    except (TypeError, ValueError):
        raise IngestError(f"{path}: 'names' has a class id that is not a whole number") from None


def _split_images(root: Path, entry: str) -> Iterator[tuple[str, Path]] | Rejected:
    """(split folder's name, image path) for a split entry (a folder, walked, or a .txt list of paths
    relative to `root`), or why it cannot be read."""
    where = root / entry
    if not inside(root, where):
        return Rejected("escapes_root", f"split {entry} leaves the dataset folder {root}")
    if where.is_file() and where.suffix == ".txt":
        try:
            lines = [line.strip() for line in where.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            return Rejected("unreadable", f"split {entry}: the list cannot be read as UTF-8 text ({exc})")
        # Ultralytics: a `./` path is relative to the list's folder, any other to the dataset's
        return ((Path(line).parent.name, (where.parent if line.startswith("./") else root) / line) for line in lines)
    if not where.is_dir():
        return Rejected("missing", f"split {entry}: {where} is neither a folder nor a .txt list of images")
    return ((where.name, path) for path in _images_under(where))


def _images_under(folder: Path) -> Iterator[Path]:
    """Image files under `folder`, hidden ones left out, in a stable order."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        yield from (Path(dirpath) / name for name in sorted(filenames)
                    if not name.startswith(".") and Path(name).suffix.lower() in IMAGE_SUFFIXES)


def _label_places(image: Path, split: str, config_dir: Path) -> list[Path]:
    """Where the label file of `image` may be, in order: Ultralytics' rule (the last `images` folder of its
    path becomes `labels`), then `labels/<split>/` beside the dataset YAML."""
    parts = image.parts
    places = []
    if "images" in parts:
        at = len(parts) - 1 - parts[::-1].index("images")
        places.append(Path(*parts[:at], "labels", *parts[at + 1:]).with_suffix(".txt"))
    split_dir = next((p for p in image.parents if p.name == split), image.parent)
    places.append((config_dir / "labels" / split / image.relative_to(split_dir)).with_suffix(".txt"))
    return places


def _yolo_object(line: str, number: int, names: dict[int, str]) -> dict[str, Any]:
    """An object (unit xyxy box), or a dropped record, for one label line."""
    where = f"line {number}"
    try:
        values = [float(v) for v in line.split()]
    except ValueError:
        return _dropped("bad_line", None, f"{where} {line!r}: not all numbers")
    if len(values) < 5 or (len(values) > 5 and len(values) % 2 == 0) or not all(map(math.isfinite, values)) \
            or values[0] != int(values[0]):
        return _dropped("bad_line", None, f"{where} {line!r}: not 'class cx cy w h' nor 'class x1 y1 x2 y2 ...'")
    label = names.get(int(values[0]))
    if label is None:
        return _dropped("unknown_class", None, f"{where}: class {int(values[0])} is not in the dataset's names")
    if len(values) == 5:
        cx, cy, w, h = values[1:]
        if w < 0 or h < 0:
            return _dropped("bad_box", label, f"{where}: negative width or height")
        box = [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
    else:  # a segment's polygon: its bounding box
        xs, ys = values[1::2], values[2::2]
        box = [min(xs), min(ys), max(xs), max(ys)]
    if not all(-UNIT_SLACK <= v <= 1 + UNIT_SLACK for v in box):
        return _dropped("bad_box", label, f"{where}: box {box} is not in unit coordinates")
    return {"label": label, "box": [min(max(v, 0.0), 1.0) for v in box]}


def _yolo_labels(path: Path | None, names: dict[int, str]) -> list[dict[str, Any]]:
    if path is None:
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return [_dropped("unreadable", None, f"label file {path.name} is not UTF-8 text: its boxes are unknown")]
    except OSError as exc:
        return [_dropped("unreadable", None, f"label file {path.name} cannot be read ({exc.strerror or exc}): "
                                             "its boxes are unknown")]
    return [_yolo_object(line, number, names) for number, line in enumerate(text.splitlines(), 1) if line.strip()]


def yolo_root(config: Path, data: dict[str, Any], images: Path | None) -> Path:
    """The folder the splits are relative to: `images` when given, else the YAML's `path` (relative to the
    YAML's folder), else the YAML's folder."""
    return (images or config.parent / str(data.get("path") or ".")).resolve()


def yolo_candidates(config: Path, *, images: Path | None = None, source: str = "",
                    license: str = "") -> Iterator[Candidate]:
    """The images of every split a YOLO dataset YAML lists, with the objects of their label files; a label
    file beside them that no image claims (or that links out of the dataset) is refused, so that its boxes
    are counted too."""
    data = _load_yaml(config)
    names = yolo_names(data, config)
    root, config_dir = yolo_root(config, data, images), config.parent.resolve()
    if not root.is_dir():
        raise IngestError(f"dataset folder {root} for {config} is not a folder; name it with --images")
    entries = [(split, str(entry)) for split in YOLO_SPLITS
               for entry in (data.get(split) if isinstance(data.get(split), list) else [data.get(split)]) if entry]
    if not entries:
        raise IngestError(f"{config} lists no split ({', '.join(YOLO_SPLITS)}) of images")
    source = source or root.name
    claimed: set[Path] = set()
    label_folders: set[Path] = set()
    for split, entry in entries:
        found = _split_images(root, entry)
        if isinstance(found, Rejected):
            yield Candidate(f"{split}: {entry}", None, refused=found)
            continue
        for folder, path in found:
            places = _label_places(path, folder, config_dir)
            label_folders.update(p.parent for p in places)
            # a label file that links out of both folders is not read
            labels = next((p for p in places if p.is_file() and (inside(root, p) or inside(config_dir, p))), None)
            claimed.add(labels)
            objects = _yolo_labels(labels, names)
            notes = {"objects": [o for o in objects if "rule" not in o],
                     "dropped": [o for o in objects if "rule" in o]}
            notes = {key: value for key, value in notes.items() if value}
            name = str(path.relative_to(root)) if inside(root, path) else str(path)
            yield _candidate(name, path, root, "dataset folder", notes, source=source, license=license,
                             version=stable_hash(notes, file_version(labels) if labels else ""))
    for folder in sorted(f for f in label_folders if f.is_dir() and (inside(root, f) or inside(config_dir, f))):
        for unread in sorted(set(folder.glob("*.txt")) - claimed):
            name = str(unread.relative_to(config_dir) if unread.is_relative_to(config_dir) else unread)
            yield Candidate(name, None, refused=(
                Rejected("no_image", "a label file that no image of the dataset has")
                if inside(root, unread) or inside(config_dir, unread)
                else Rejected("escapes_root", "a label file that links out of the dataset's folders: not read")))
