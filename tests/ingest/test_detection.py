"""COCO and YOLO datasets as ingest sources, through the CLI: real photos from ../shared/data with every box
accounted for against the dataset's own files (read here, by this test's code), and small inline datasets
for crowds, drops, escapes and malformed files."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from PIL import Image

from benchsmith.settings import IngestSettings
from benchsmith.store import Store
from ingest.candidates import IngestError
from ingest.sources import candidates_for
from ingest.stage import ingest
from tests.benchsmith.test_cli import run
from tests.support.shared_data import require_shared_data

NO_RICHNESS = {"BENCHSMITH__INGEST__RICHNESS__ENABLED": "false"}  # spaCy's load is not what these tests are about


def stored(workspace: Path) -> tuple[dict, list]:
    """{original name: image} of every stored image (excluded ones too), and the ingest verdicts."""
    with Store(f"sqlite:///{workspace / 'bench' / 'benchsmith.db'}") as store:
        images = {i.original_name: i for i in store.get_items(kind="image", status=None)}
        return images, store.get_verdicts(stage="ingest")


def excluded(workspace: Path) -> set[str]:
    with Store(f"sqlite:///{workspace / 'bench' / 'benchsmith.db'}") as store:
        return {i.original_name for i in store.get_items(kind="image", status="excluded")}


def unit_xyxy(x: float, y: float, w: float, h: float, width: int, height: int) -> list[float]:
    return [round(min(max(v, 0.0), 1.0), 6) for v in (x / width, y / height, (x + w) / width, (y + h) / height)]


# --- COCO: the 80 photos of coco-mini-train --------------------------------------------------------------

@pytest.fixture(scope="module")
def coco_mini(tmp_path_factory):
    folder = require_shared_data("coco-mini-train")
    workspace = tmp_path_factory.mktemp("coco")
    result = run("ingest", str(folder / "annotations" / "instances_train2017.json"), cwd=workspace)
    assert result.returncode == 0, result.stderr
    truth = json.loads((folder / "annotations" / "instances_train2017.json").read_text())
    captions = json.loads((folder / "annotations" / "captions_train2017.json").read_text())
    return result.stdout, *stored(workspace), truth, captions, excluded(workspace)


def test_every_coco_photo_comes_in_with_every_box_kept_or_dropped_with_a_counted_reason(coco_mini):
    out, images, verdicts, truth, _captions, _excluded = coco_mini
    assert "80 seen, 80 added" in out and verdicts == []
    assert len(truth["annotations"]) == 739
    by_image = defaultdict(list)
    for annotation in truth["annotations"]:
        by_image[annotation["image_id"]].append(annotation)
    names = {c["id"]: c["name"] for c in truth["categories"]}
    kept = crowds = 0
    dropped = Counter()
    for record in truth["images"]:
        image = images[record["file_name"]]
        objects, gone = image.annotations.get("objects", []), image.annotations.get("dropped", [])
        assert len(objects) + len(gone) == len(by_image[record["id"]])
        expected = sorted((names[a["category_id"]], unit_xyxy(*a["bbox"], record["width"], record["height"]),
                           bool(a["iscrowd"])) for a in by_image[record["id"]] if a.get("bbox"))
        assert sorted((o["label"], o["box"], o.get("crowd", False)) for o in objects) == expected
        assert all("crowd" not in o or o["crowd"] is True for o in objects)
        kept += len(objects)
        dropped.update(f"{d['kind']} {d['rule']}" for d in gone)
        crowds += sum(bool(o.get("crowd")) for o in objects)
    assert kept + sum(dropped.values()) == 739
    assert all(f"{n} {rule}" in out for rule, n in dropped.items())  # each reason counted in the summary
    assert crowds == sum(a["iscrowd"] for a in truth["annotations"]) == 8


def test_coco_photos_keep_their_own_licence_source_and_five_captions(coco_mini):
    _out, images, _verdicts, truth, captions, _excluded = coco_mini
    licences = {entry["id"]: entry for entry in truth["licenses"]}
    said = defaultdict(list)
    for annotation in captions["annotations"]:
        said[annotation["image_id"]].append(annotation["caption"].strip())
    for record in truth["images"]:
        image = images[record["file_name"]]
        licence = licences[record["license"]]
        assert image.license == f"{licence['name']} {licence['url']}"
        assert image.source == "coco-train2017"
        assert sorted(image.annotations["captions"]) == sorted(said[record["id"]]) and len(said[record["id"]]) == 5
        assert (image.width, image.height) == (record["width"], record["height"])


def test_a_photo_with_enough_objects_passes_richness_whatever_its_short_captions_say(coco_mini):
    _out, images, _verdicts, _truth, _captions, poor = coco_mini
    objects = {name: sum(not o.get("crowd") for o in i.annotations.get("objects", [])) for name, i in images.items()}
    assert sum(n >= 6 for n in objects.values()) == 41
    assert poor and all(objects[name] < 6 for name in poor)  # richness.min_objects: 6 kept every one of the 41


# --- YOLO: all of coco128, both splits -----------------------------------------------------------------

@pytest.fixture(scope="module")
def coco128(tmp_path_factory):
    folder = require_shared_data("coco128")
    workspace = tmp_path_factory.mktemp("yolo")
    result = run("ingest", str(folder / "object_detection" / "config.yaml"), "--images", str(folder), cwd=workspace,
                 env=NO_RICHNESS)
    assert result.returncode == 0, result.stderr
    return folder, workspace, result.stdout, *stored(workspace)


def yolo_truth(folder: Path) -> tuple[dict[str, list[tuple[str, list[float]]]], dict[str, int]]:
    """{image's path under the dataset: [(label, unit xyxy)]} from the label files, and the box lines of the
    label files that have no image."""
    import yaml

    names = yaml.safe_load((folder / "object_detection" / "config.yaml").read_text())["names"]
    labels_root = folder / "object_detection" / "labels"
    boxes, orphans = {}, {}
    for image in sorted(folder.glob("images/*/*.jpg")):
        boxes[str(image.relative_to(folder))] = []
    for label_file in sorted(labels_root.glob("*/*.txt")):
        lines = [line.split() for line in label_file.read_text().splitlines() if line.strip()]
        image = f"images/{label_file.parent.name}/{label_file.stem}.jpg"
        if image not in boxes:
            orphans[label_file.name] = len(lines)
            continue
        for cls, cx, cy, w, h in lines:
            cx, cy, w, h = map(float, (cx, cy, w, h))
            box = [min(max(v, 0.0), 1.0) for v in (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)]
            boxes[image].append((names[int(cls)], [round(v, 6) for v in box]))
    return boxes, orphans


def test_every_yolo_photo_comes_in_and_every_label_line_is_accounted_for(coco128):
    folder, _workspace, out, images, verdicts = coco128
    boxes, orphans = yolo_truth(folder)
    assert len(boxes) == 252 and f"{len(boxes) + len(orphans)} seen, 252 added" in out
    kept = 0
    for name, expected in boxes.items():
        image = images[name]
        objects = image.annotations.get("objects", [])
        assert sorted((o["label"], o["box"]) for o in objects) == sorted(expected), name
        assert image.annotations.get("dropped", []) == []
        assert image.source == "coco128"
        kept += len(objects)
    # a label file without its image is refused with a verdict, so its boxes are counted too
    assert sorted(v.subject_id.rsplit("/", 1)[-1] for v in verdicts) == sorted(orphans)
    assert {v.rule for v in verdicts} == {"no_image"} and f"{len(orphans)} refused ({len(orphans)} no_image)" in out
    total_lines = sum(len([line for line in f.read_text().splitlines() if line.strip()])
                      for f in (folder / "object_detection" / "labels").glob("*/*.txt"))
    assert kept + sum(orphans.values()) == total_lines


def test_greyscale_jpegs_come_in_as_rgb_with_their_boxes(coco128):
    folder, workspace, _out, images, _verdicts = coco128
    for name in ("images/train2017/000000000086.jpg", "images/val2017/000000007888.jpg"):
        assert Image.open(folder / name).mode == "L"
        image = images[name]
        with Image.open(workspace / "bench" / "media" / image.path) as copy:
            assert copy.mode == "RGB" and copy.size == (image.width, image.height)
        assert image.annotations["objects"]


# --- small inline datasets: crowds, drops, escapes, malformed files --------------------------------------

def png(path: Path, size=(64, 48), colour=(120, 40, 40), mode="RGB") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size, colour if mode == "RGB" else colour[0]).save(path)


def small_coco(root: Path) -> Path:
    """COCO's own layout (annotations/ beside the split's folder) with one of every kind of box."""
    png(root / "val" / "a.png")
    png(root / "val" / "b.png", colour=(10, 90, 200))
    png(root / "outside.png", colour=(1, 2, 3))
    annotations = [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": [4, 4, 20, 10], "iscrowd": 0},
        {"id": 2, "image_id": 1, "category_id": 2, "bbox": [30, 10, 30, 30], "iscrowd": 1},
        {"id": 3, "image_id": 1, "category_id": 1, "segmentation": [[1, 1, 9, 1, 9, 9]], "iscrowd": 0},
        {"id": 4, "image_id": 1, "category_id": 1, "bbox": [5, 5, 0, 8], "iscrowd": 0},
        {"id": 5, "image_id": 1, "category_id": 77, "bbox": [5, 5, 8, 8], "iscrowd": 0},
        {"id": 6, "image_id": 2, "category_id": 2, "bbox": [5, 5, -3, 8], "iscrowd": 0},
        {"id": 7, "image_id": 999, "category_id": 1, "bbox": [5, 5, 8, 8], "iscrowd": 0},
    ]
    instances = {"licenses": [{"id": 4, "name": "Attribution License",
                               "url": "http://creativecommons.org/licenses/by/2.0/"}],
                 "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "person"}],
                 "images": [{"id": 1, "file_name": "a.png", "license": 4, "width": 64, "height": 48},
                            {"id": 2, "file_name": "b.png"},
                            {"id": 3, "file_name": "gone.png"},
                            {"id": 4, "file_name": "../outside.png"}],
                 "annotations": annotations}
    captions = {"images": instances["images"],
                "annotations": [{"id": 10, "image_id": 1, "caption": "A cat beside a crowd."},
                                {"id": 11, "image_id": 2, "caption": "An empty room."}]}
    (root / "annotations").mkdir()
    (root / "annotations" / "captions_val.json").write_text(json.dumps(captions))
    path = root / "annotations" / "instances_val.json"
    path.write_text(json.dumps(instances))
    return path


def test_a_coco_file_keeps_crowds_as_crowds_and_counts_every_box_it_cannot_keep(tmp_path):
    path = small_coco(tmp_path / "coco")
    result = run("ingest", str(path), "--license", "CC0-1.0", cwd=tmp_path, env=NO_RICHNESS)
    assert result.returncode == 0, result.stderr
    assert ("5 seen, 2 added, 0 already in the store, 3 refused (1 escapes_root, 1 missing, 1 unknown_image), "
            "4 supplied boxes dropped (1 object bad_box, 1 object no_area, 1 object no_box, 1 object "
            "unknown_class; each with its reason under its image's annotations.dropped)") in result.stdout
    images, verdicts = stored(tmp_path)
    a, b = images["a.png"], images["b.png"]
    assert [(o["label"], o.get("crowd", False)) for o in a.annotations["objects"]] == [("cat", False), ("person", True)]
    assert a.annotations["objects"][0]["box"] == unit_xyxy(4, 4, 20, 10, 64, 48)
    assert sorted(d["rule"] for d in a.annotations["dropped"]) == ["no_area", "no_box", "unknown_class"]
    assert [d["rule"] for d in b.annotations["dropped"]] == ["bad_box"] and "objects" not in b.annotations
    assert all(d["reason"] for d in a.annotations["dropped"] + b.annotations["dropped"])
    assert a.annotations["captions"] == ["A cat beside a crowd."] and b.annotations["captions"] == ["An empty room."]
    assert a.license == "Attribution License http://creativecommons.org/licenses/by/2.0/" and b.license == "CC0-1.0"
    assert {v.rule: v.subject_id.split(":", 1)[1] for v in verdicts} == {
        "escapes_root": "../outside.png", "missing": "gone.png", "unknown_image": "instances_val.json:annotations[6]"}

    again = run("ingest", str(path), cwd=tmp_path, env=NO_RICHNESS)  # resumable: nothing is read or judged twice
    assert "5 seen, 0 added, 5 unchanged since the last ingest (not read again)" in again.stdout


def test_a_coco_file_with_task_matching_gives_each_photo_its_captions_as_a_matching_annotation(tmp_path):
    path = small_coco(tmp_path / "coco")
    result = run("ingest", str(path), "--task", "matching", cwd=tmp_path, env=NO_RICHNESS)
    assert result.returncode == 0, result.stderr
    images, _verdicts = stored(tmp_path)
    assert images["a.png"].annotations["reform"] == [
        {"task": "matching", "dataset": "coco-val", "row": "instances_val.json:1",
         "fields": {"image_id": 1, "captions": ["A cat beside a crowd."]}}]
    assert images["b.png"].annotations["reform"][0]["fields"]["captions"] == ["An empty room."]
    assert images["a.png"].annotations["captions"] == ["A cat beside a crowd."]   # still the photo's captions

    plain = run("ingest", str(path), cwd=tmp_path / "coco", env=NO_RICHNESS)   # without --task: captions only
    assert plain.returncode == 0 and "reform" not in stored(tmp_path / "coco")[0]["a.png"].annotations


def test_a_task_kind_a_coco_or_yolo_file_cannot_feed_is_one_clear_line(tmp_path):
    path = small_coco(tmp_path / "coco")
    result = run("ingest", str(path), "--task", "vqa", cwd=tmp_path, env=NO_RICHNESS)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "is a COCO file" in result.stderr and "caption kind (matching)" in result.stderr
    (tmp_path / "data.yaml").write_text("names: [cat]\ntrain: images\n")
    with pytest.raises(IngestError, match="not to YOLO files"):
        list(candidates_for(tmp_path / "data.yaml", task="matching"))


def test_malformed_coco_and_yolo_files_are_one_clear_line_each(tmp_path):
    (tmp_path / "broken.json").write_text('{"images": [')
    result = run("ingest", "broken.json", cwd=tmp_path, env=NO_RICHNESS)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "broken.json is not valid JSON" in result.stderr and "line 1 column" in result.stderr

    cases = {"list.json": ("[1, 2]", "is not a COCO annotation file"),
             "category.json": ('{"images": [], "annotations": [], "categories": [{"id": 1}]}',
                               "categories[0] is not an object with id, name"),
             "no_image_id.json": ('{"images": [], "annotations": [{"bbox": [1, 1, 2, 2]}]}',
                                  "annotations[0] is not an object with image_id"),
             "broken.yaml": ("names: [cat\n", "is not valid YAML"),
             "nameless.yaml": ("train: images\n", "has no 'names'"),
             "badnames.yaml": ("names: {x: cat}\n", "class id that is not a whole number"),
             "nosplit.yaml": ("names: [cat]\n", "lists no split")}
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(IngestError, match=re.escape(message)):
            list(candidates_for(tmp_path / name))


def small_yolo(root: Path) -> Path:
    """Ultralytics' own layout: images/<split>, labels/<split>, data.yaml at the top."""
    png(root / "images" / "train" / "x.png", size=(100, 50))
    png(root / "images" / "train" / "grey.jpg", size=(40, 40), colour=(90, 90, 90), mode="L")
    png(root / "images" / "val" / "y.png", size=(60, 60), colour=(0, 200, 0))
    (root / "labels" / "train").mkdir(parents=True)
    (root / "labels" / "val").mkdir(parents=True)
    (root / "labels" / "train" / "x.txt").write_text(
        "0 0.5 0.5 0.2 0.4\n"          # kept
        "1 0.1 0.1 0.2 0.2\n"          # kept, touching the top-left corner
        "\n"
        "0 0.5 0.5 abc 0.1\n"          # not numbers
        "0 0.5 0.5\n"                  # too few
        "7 0.5 0.5 0.1 0.1\n"          # class 7 is not named
        "0 0.5 0.5 0 0.2\n"            # no area
        "1 0.5 0.5 3 0.1\n"            # far outside the unit square
        "0 0.1 0.2 0.3 0.2 0.3 0.6\n")  # a polygon: kept as its bounding box
    (root / "labels" / "train" / "grey.txt").write_text("1 0.5 0.5 0.5 0.5\n")
    (root / "labels" / "val" / "lost.txt").write_text("0 0.5 0.5 0.5 0.5\n1 0.5 0.5 0.5 0.5\n")
    config = root / "data.yaml"
    config.write_text("path: .\ntrain: images/train\nval: images/val\ntest: ../elsewhere\n"
                      "names:\n  0: person\n  1: car\n")
    return config


def test_a_yolo_dataset_in_ultralytics_layout_keeps_good_lines_and_counts_each_bad_one(store, tmp_path):
    config = small_yolo(tmp_path / "ds")
    report = ingest(store, tmp_path / "media", candidates_for(config), IngestSettings(min_side=16), label="ds")
    assert (report.seen, report.added) == (5, 3)
    assert report.rejected == {"escapes_root": 1, "no_image": 1}
    assert report.dropped == {"object bad_line": 2, "object unknown_class": 1, "object no_area": 1, "object bad_box": 1}
    images = {i.original_name: i for i in store.get_items()}
    x = images["images/train/x.png"].annotations
    assert [(o["label"], o["box"]) for o in x["objects"]] == [
        ("person", [0.4, 0.3, 0.6, 0.7]), ("car", [0.0, 0.0, 0.2, 0.2]), ("person", [0.1, 0.2, 0.3, 0.6])]
    assert [d["rule"] for d in x["dropped"]] == ["bad_line", "bad_line", "unknown_class", "bad_box", "no_area"]
    assert [d["reason"].split(":")[0].split(" ")[:2] for d in x["dropped"][:4]] == [["line", "4"], ["line", "5"],
                                                                                   ["line", "6"], ["line", "8"]]
    assert [o["label"] for o in images["images/train/grey.jpg"].annotations["objects"]] == ["car"]
    assert images["images/val/y.png"].annotations == {}  # no label file: a background image
    refused = {v.rule: v.subject_id for v in store.get_verdicts(stage="ingest")}
    assert refused["no_image"].endswith("labels/val/lost.txt") and "../elsewhere" in refused["escapes_root"]

    (tmp_path / "ds" / "labels" / "val" / "y.txt").write_text("1 0.5 0.5 0.5 0.5\n")  # y gets its label file
    again = ingest(store, tmp_path / "media", candidates_for(config), IngestSettings(min_side=16), label="ds")
    assert (again.seen, again.skipped, again.added, again.unchanged) == (5, 4, 0, 1)  # only y is read again


def test_a_yolo_split_outside_its_folder_and_a_label_file_outside_are_not_read(store, tmp_path):
    config = small_yolo(tmp_path / "ds")
    outside = tmp_path / "secret"
    png(outside / "s.png")
    (tmp_path / "ds" / "images" / "train" / "link.png").symlink_to(outside / "s.png")
    (tmp_path / "ds" / "list.txt").write_text("images/val/y.png\n../secret/s.png\n")
    (outside / "y.txt").write_text("0 0.5 0.5 0.5 0.5\n")
    (tmp_path / "ds" / "labels" / "val" / "y.txt").symlink_to(outside / "y.txt")
    config.write_text("train: list.txt\nval: images/train\nnames: [person, car]\n")
    report = ingest(store, tmp_path / "media", candidates_for(config), IngestSettings(min_side=16), label="ds")
    # the listed path, the linked image and the linked label file, each refused; the label without its image too
    assert report.rejected == {"escapes_root": 3, "no_image": 1}
    images = {i.original_name: i for i in store.get_items()}
    assert set(images) == {"images/val/y.png", "images/train/x.png", "images/train/grey.jpg"}
    assert images["images/val/y.png"].annotations == {}  # its label file links outside: not read
