"""Oracle scenes: deterministic, and their truth matches the pixels."""

from __future__ import annotations

import hashlib
import json

from PIL import Image

from ingest.scenes import COLOURS, SIZES, make_scenes


def rows(manifest):
    return [json.loads(line) for line in manifest.read_text().splitlines()]


def test_the_same_seed_renders_the_same_scenes(tmp_path):
    a = make_scenes(tmp_path / "a", 6, seed=3)
    b = make_scenes(tmp_path / "b", 6, seed=3)
    c = make_scenes(tmp_path / "c", 6, seed=4)
    digest = lambda m: [hashlib.sha256((m.parent / r["path"]).read_bytes()).hexdigest() for r in rows(m)]  # noqa: E731
    assert digest(a) == digest(b) and a.read_text() == b.read_text()
    assert digest(a) != digest(c)


def test_scenes_hold_two_to_nine_shapes_and_up_to_two_signs(oracle_dir):
    scenes = rows(oracle_dir / "manifest.jsonl")
    assert len(scenes) == 40
    for scene in scenes:
        assert 2 <= len(scene["objects"]) <= 9
        assert len(scene["truth"]["signs"]) <= 2
        assert sum(scene["truth"]["counts"].values()) == len(scene["objects"])
    assert any(len(s["truth"]["signs"]) == 0 for s in scenes) and any(len(s["truth"]["signs"]) == 2 for s in scenes)


def test_each_object_shows_its_colour_at_the_centre_of_its_box(oracle_dir):
    checked = 0
    for scene in rows(oracle_dir / "manifest.jsonl"):
        img = Image.open(oracle_dir / scene["path"]).convert("RGB")
        w, h = img.size
        for i, obj in enumerate(scene["objects"]):
            x1, y1, x2, y2 = obj["box"]
            centre = ((x1 + x2) / 2, (y1 + y2) / 2)
            covered = any(j > i and o["box"][0] <= centre[0] <= o["box"][2] and o["box"][1] <= centre[1] <= o["box"][3]
                          for j, o in enumerate(scene["objects"]))
            if covered or obj["label"] in ("triangle", "star"):  # their box centre may lie off the shape
                continue
            assert img.getpixel((int(centre[0] * w), int(centre[1] * h))) == COLOURS[obj["attributes"]["colour"]]
            checked += 1
    assert checked > 50


def test_object_boxes_fit_their_size_class_and_the_frame(oracle_dir):
    for scene in rows(oracle_dir / "manifest.jsonl"):
        for obj in scene["objects"]:
            x1, y1, x2, y2 = obj["box"]
            assert 0 <= x1 < x2 <= 1 and 0 <= y1 < y2 <= 1
            low, high = SIZES[obj["attributes"]["size"]]
            extent = max((x2 - x1) * 640, (y2 - y1) * 480)  # a star or hexagon is a little narrower than its square
            assert 0.9 * low - 2 <= extent <= high + 2


def test_sign_words_are_in_the_caption_and_the_ocr_truth(oracle_dir):
    for scene in rows(oracle_dir / "manifest.jsonl"):
        words = [line["text"] for line in scene["ocr"]]
        assert words == scene["truth"]["words"]
        for word in words:
            assert word in scene["captions"][0]
