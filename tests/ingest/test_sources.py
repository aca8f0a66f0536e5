"""Ingesting folders, manifests and datasets: good files in, every bad file refused with a reason."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ingest.candidates import IngestError
from ingest.sources import candidates_for
from ingest.stage import ingest
from benchsmith.settings import IngestSettings

SETTINGS = IngestSettings(min_side=16, max_pixels=10_000_000, batch_size=4)


def png(path: Path, colour=(200, 30, 30), size=(48, 40)) -> bytes:
    noise = np.random.default_rng(sum(colour)).integers(0, 30, (size[1], size[0], 3), dtype=np.uint8)
    img = Image.fromarray(np.clip(noise + np.array(colour, dtype=np.uint8), 0, 255).astype(np.uint8))
    buffer = io.BytesIO()
    img.save(buffer, "PNG")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return buffer.getvalue()


def bad_folder(root: Path, outside: Path) -> dict[str, str]:
    """Three good images and one bad file of each kind; returns {bad file name: expected rule}."""
    good = png(root / "good_red.png")
    png(root / "nested" / "good_green.png", (30, 200, 30))
    Image.new("CMYK", (40, 40), (0, 200, 0, 0)).save(root / "good_cmyk.jpg")
    noise = Image.fromarray(np.random.default_rng(1).integers(0, 255, (64, 64, 3), dtype=np.uint8))
    buffer = io.BytesIO()
    noise.save(buffer, "JPEG")
    jpeg = buffer.getvalue()
    (root / "empty.png").write_bytes(b"")
    (root / "notes.jpg").write_text("holiday notes, not a photo")
    (root / "page.html").write_text("<html><body>hi</body></html>")
    (root / "vector.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    (root / "cut.png").write_bytes(good[: len(good) // 2])
    (root / "cut.jpg").write_bytes(jpeg[: len(jpeg) // 2])
    (root / "broken_header.png").write_bytes(good[:16] + b"\x00" * 40 + good[56:])
    Image.new("1", (5000, 3000)).save(root / "bomb.png")
    Image.new("RGB", (8, 8)).save(root / "tiny.png")
    (root / "red_copy.png").write_bytes(good)
    png(outside / "secret.png", (1, 2, 3))
    os.symlink(outside / "secret.png", root / "link_out.png")
    return {"empty.png": "empty", "notes.jpg": "not_an_image", "page.html": "not_an_image",
            "vector.svg": "not_an_image", "cut.png": "truncated", "cut.jpg": "truncated",
            "broken_header.png": "corrupt", "bomb.png": "too_many_pixels", "tiny.png": "too_small",
            "red_copy.png": "duplicate", "link_out.png": "escapes_root"}


def test_a_folder_of_bad_files_keeps_the_good_and_refuses_each_bad_one_once(store, tmp_path):
    root, outside = tmp_path / "photos", tmp_path / "elsewhere"
    expected = bad_folder(root, outside)
    report = ingest(store, tmp_path / "media", candidates_for(root), SETTINGS, label="photos")
    assert report.added == 3
    refused = {v.subject_id.removeprefix("photos:"): v.rule for v in store.get_verdicts(stage="ingest")}
    assert refused == expected
    assert all(v.reason for v in store.get_verdicts(stage="ingest"))
    assert sum(report.rejected.values()) == len(expected)

    again = ingest(store, tmp_path / "media", candidates_for(root), SETTINGS, label="photos")
    assert (again.added, again.skipped, again.rejected) == (0, again.seen, {})  # nothing read or judged twice
    assert len(store.get_items()) == 3
    assert len(store.get_verdicts(stage="ingest")) == len(expected)


def test_a_rerun_reads_only_files_that_changed_and_stricter_limits_read_everything_again(store, tmp_path):
    root = tmp_path / "photos"
    png(root / "a.png", (200, 10, 10))
    png(root / "b.png", (10, 200, 10))
    ingest(store, tmp_path / "media", candidates_for(root), SETTINGS, label="photos")
    png(root / "b.png", (10, 10, 200))  # rewritten in place: new bytes, a new image
    png(root / "c.png", (90, 90, 90))
    again = ingest(store, tmp_path / "media", candidates_for(root), SETTINGS, label="photos")
    assert (again.seen, again.skipped, again.added) == (3, 1, 2)
    stricter = SETTINGS.model_copy(update={"min_side": SETTINGS.min_side + 1})
    rechecked = ingest(store, tmp_path / "media", candidates_for(root), stricter, label="photos")
    assert (rechecked.skipped, rechecked.unchanged, rechecked.added) == (0, 3, 0)


def test_stored_images_are_normalised_copies_named_by_content(store, tmp_path):
    (tmp_path / "in").mkdir()
    Image.new("CMYK", (40, 40), (0, 200, 0, 0)).save(tmp_path / "in" / "c.jpg")
    ingest(store, tmp_path / "media", candidates_for(tmp_path / "in"), SETTINGS, label="in")
    [item] = store.get_items()
    stored = Image.open(tmp_path / "media" / item.path)
    assert stored.mode == "RGB" and item.path.startswith(item.id[:2] + "/" + item.id)


def manifest(root: Path, rows: list[dict | str]) -> Path:
    path = root / "manifest.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_a_manifest_brings_annotations_in_unit_coordinates(store, tmp_path):
    png(tmp_path / "a.png", size=(200, 100))
    path = manifest(tmp_path, [{
        "path": "a.png", "source": "coco-val", "license": "CC-BY-4.0",
        "captions": "a red square on a table",
        "objects": [{"label": "square", "box_px": [20, 10, 120, 60], "attributes": {"colour": "red"}},
                    {"label": "cup", "bbox": [100, 50, 50, 25]}],
        "ocr": [{"text": "OPEN", "box": [0.1, 0.1, 0.3, 0.2]}],
    }])
    ingest(store, tmp_path / "media", candidates_for(path), SETTINGS, label="m")
    [item] = store.get_items()
    assert (item.source, item.license) == ("coco-val", "CC-BY-4.0")
    assert item.annotations["captions"] == ["a red square on a table"]
    assert item.annotations["objects"][0]["box"] == [0.1, 0.1, 0.6, 0.6]
    assert item.annotations["objects"][1]["box"] == [0.5, 0.5, 0.75, 0.75]
    assert item.annotations["ocr"][0]["quad"] == [[0.1, 0.1], [0.3, 0.1], [0.3, 0.2], [0.1, 0.2]]


def test_manifest_paths_cannot_leave_the_manifest_folder(store, tmp_path):
    png(tmp_path / "outside.png")
    root = tmp_path / "set"
    png(root / "inside.png", (5, 5, 200))
    path = manifest(root, [{"path": "inside.png"}, {"path": "../outside.png"}, {"path": str(tmp_path / "outside.png")},
                           {"path": "sub/../../outside.png"}])
    report = ingest(store, tmp_path / "media", candidates_for(path), SETTINGS, label="m")
    assert report.added == 1 and report.rejected == {"escapes_root": 3}


def test_bad_manifest_rows_are_refused_one_by_one(store, tmp_path):
    png(tmp_path / "ok.png")
    png(tmp_path / "boxed.png", (0, 0, 250))
    path = manifest(tmp_path, [
        {"path": "ok.png"}, "{not json", '["a", "list"]', {"caption": "no path"}, {"path": "gone.png"},
        {"path": "boxed.png", "objects": [{"label": "cup", "box": [10, 10, 50, 50]}]},
    ])
    report = ingest(store, tmp_path / "media", candidates_for(path), SETTINGS, label="m")
    assert report.added == 1
    assert report.rejected == {"bad_manifest_row": 3, "missing": 1, "bad_annotations": 1}
    reasons = {v.rule: v.reason for v in store.get_verdicts(stage="ingest")}
    assert "box_px" in reasons["bad_annotations"]


def test_a_csv_manifest_reads_captions_and_json_annotations(store, tmp_path):
    png(tmp_path / "a.png")
    (tmp_path / "list.csv").write_text(
        'path,caption,license,annotations\na.png,a red thing,CC0,"{""tags"": [""red""]}"\n')
    ingest(store, tmp_path / "media", candidates_for(tmp_path / "list.csv"), SETTINGS, label="csv")
    [item] = store.get_items()
    assert item.annotations == {"captions": ["a red thing"], "tags": ["red"]} and item.license == "CC0"


def test_a_saved_hugging_face_dataset_and_parquet_files_are_sources(store, tmp_path):
    import datasets

    images = [Image.new("RGB", (32, 32), (i * 60, 0, 0)) for i in range(3)]
    ds = datasets.Dataset.from_dict({"image": images, "caption": ["x", "y", "z"], "license": ["CC0"] * 3},
                                    features=datasets.Features({"image": datasets.Image(),
                                                                "caption": datasets.Value("string"),
                                                                "license": datasets.Value("string")}))
    ds.save_to_disk(str(tmp_path / "saved"))
    ds.to_parquet(str(tmp_path / "rows.parquet"))
    first = ingest(store, tmp_path / "media", candidates_for(tmp_path / "saved"), SETTINGS, label="hf")
    second = ingest(store, tmp_path / "media", candidates_for(tmp_path / "rows.parquet"), SETTINGS, label="pq")
    assert first.added == 3
    assert second.added == 0 and second.rejected == {"duplicate": 3}  # same bytes, other names
    assert sorted(i.annotations["captions"][0] for i in store.get_items()) == ["x", "y", "z"]


def test_a_dataset_of_images_alone_ingests_every_row(tmp_path):
    import datasets

    from tests.faults.conftest import run_cli

    images = [Image.new("RGB", (32, 32), (i * 60, 0, 0)) for i in range(3)]
    datasets.Dataset.from_dict({"image": images}, features=datasets.Features({"image": datasets.Image()})) \
        .to_parquet(str(tmp_path / "only_images.parquet"))
    result = run_cli("ingest", "only_images.parquet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "3 seen, 3 added" in result.stdout


def test_a_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(IngestError, match="does not exist"):
        candidates_for(tmp_path / "nowhere")


def test_task_rows_keep_their_columns_and_rows_sharing_an_image_join_it(store, tmp_path):
    png(tmp_path / "a.png", (10, 10, 200))
    png(tmp_path / "b.png", (10, 200, 10))
    rows = [{"path": "a.png", "task": "vqa", "source": "vqav2", "question_id": 1, "question": "What colour?",
             "answers": ["blue"] * 10, "annotations": {"tags": ["sky"]}},
            {"path": "a.png", "task": "vqa", "source": "vqav2", "question_id": 2, "question": "Is it day?",
             "answers": ["yes"] * 10},
            {"path": "b.png", "question_id": 3, "question": "What colour?", "answers": ["green"] * 10}]
    (tmp_path / "vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    first = ingest(store, tmp_path / "media", candidates_for(tmp_path / "vqa.jsonl", task="vqa"), SETTINGS, label="m")
    assert (first.added, first.annotated, first.rejected) == (2, 1, {})
    by_name = {i.original_name: i for i in store.get_items()}
    a, b = by_name["a.png"], by_name["b.png"]
    assert [r["fields"]["question_id"] for r in a.annotations["reform"]] == [1, 2]
    assert a.annotations["reform"][0] == {"task": "vqa", "dataset": "vqav2", "row": "vqa.jsonl:1", "fields": {
        "question_id": 1, "question": "What colour?", "answers": ["blue"] * 10}}
    assert a.annotations["tags"] == ["sky"] and "captions" not in a.annotations
    assert b.annotations["reform"][0]["task"] == "vqa" and b.annotations["reform"][0]["dataset"] == "vqa"

    again = ingest(store, tmp_path / "media", candidates_for(tmp_path / "vqa.jsonl", task="vqa"), SETTINGS, label="m")
    assert (again.added, again.annotated) == (0, 0)  # re-ingesting adds nothing
    more = tmp_path / "more.jsonl"   # a later dataset row about a stored image joins it
    more.write_text(json.dumps({"path": "b.png", "task": "classification", "label": "meadow"}) + "\n")
    joined = ingest(store, tmp_path / "media", candidates_for(more), SETTINGS, label="m")
    assert (joined.added, joined.annotated) == (0, 1)
    [b] = store.get_items([b.id])
    assert [r["task"] for r in b.annotations["reform"]] == ["vqa", "classification"]


def test_a_dataset_with_class_labels_keeps_their_names_for_its_task(store, tmp_path):
    import datasets

    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=["cat", "dog"])})
    ds = datasets.Dataset.from_dict({"image": [Image.new("RGB", (32, 32), (i * 90, 9, 9)) for i in range(2)],
                                     "label": [1, 0]}, features=features)
    ds.save_to_disk(str(tmp_path / "pets"))
    ingest(store, tmp_path / "media", candidates_for(tmp_path / "pets", task="classification"), SETTINGS, label="hf")
    records = [i.annotations["reform"][0] for i in store.get_items()]
    assert sorted(r["fields"]["label"] for r in records) == ["cat", "dog"]
    assert {r["row"] for r in records} == {"pets[0]", "pets[1]"} and {r["dataset"] for r in records} == {"pets"}
    with pytest.raises(IngestError, match="not to a folder"):
        candidates_for(tmp_path / "media", task="classification")


def test_markup_in_any_supplied_text_that_can_become_question_text_is_refused_with_its_reason(tmp_path):
    from tests.benchsmith.test_cli import run

    box = [0.1, 0.1, 0.6, 0.6]
    rows = {  # file -> its row; every text a question can be made of, each once with markup
        "label.png": {"objects": [{"label": "<b>cat</b>", "box": box}]},
        "attribute.png": {"objects": [{"label": "car", "box": box, "attributes": {"colour": "<svg onload=alert(3)>"}}]},
        "ocr.png": {"ocr": [{"text": "<script>x</script>", "box": box}]},
        "caption.png": {"caption": "a <i>red</i> car"},
        "answer.png": {"task": "vqa", "question": "What is on sale?", "answers": ["<img src=x onerror=alert(1)>"]},
        "kept.png": {"caption": "a sign says SALE $5 {{x}} a < b", "ocr": [{"text": "$10.99", "box": box}],
                     "objects": [{"label": "sign", "box": box, "attributes": {"colour": "$question"}}]},
    }
    lines = []
    for index, (name, row) in enumerate(rows.items()):
        png(tmp_path / name, (20 * index, 90, 200), size=(64, 64))
        lines.append(json.dumps({"path": name, **row}) + "\n")
    (tmp_path / "m.jsonl").write_text("".join(lines))

    done = run("ingest", "m.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 added" in done.stdout and "5 refused (5 bad_annotations)" in done.stdout, done.stdout
    refused = run("status", "--refused", cwd=tmp_path).stdout
    for what in ("label", "attribute 'colour'", "ocr text", "caption", "vqa column answers[0]"):
        assert f"{what} contains markup (HTML tags)" in refused, refused
