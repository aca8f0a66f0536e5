"""The same picture in other bytes is refused at ingest, through the CLI: copies of stored pictures saved
as JPEG quality 85, a pixel narrower, cropped a little or recoloured, against distinct pictures (oracle
scenes, alike by design, and real photos) that must still come in."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageEnhance

from benchsmith.store import Store
from tests.benchsmith.test_cli import BENCHSMITH
from tests.support.shared_data import require_shared_data


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "PREFECT_API"))}
    done = subprocess.run([BENCHSMITH, *args], cwd=cwd, env=clean, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def jpeg(image: Image.Image, quality: int = 95) -> bytes:
    out = io.BytesIO()
    image.convert("RGB").save(out, "JPEG", quality=quality)
    return out.getvalue()


def copies_of(image: Image.Image) -> dict[str, bytes]:
    w, h = image.size
    hsv = np.array(image.convert("HSV"))
    hsv[..., 0] = (hsv[..., 0].astype(int) + 12) % 256
    return {"q85": jpeg(image, 85), "narrower": jpeg(image.resize((w - 1, h))),
            "narrower_q85": jpeg(image.resize((w - 1, h)), 85),
            "cropped": jpeg(image.crop((round(0.02 * w), round(0.02 * h), w - round(0.02 * w), h - round(0.02 * h)))),
            "brighter": jpeg(ImageEnhance.Brightness(image).enhance(1.1)),
            "hue": jpeg(Image.fromarray(hsv, "HSV"))}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    """Round 1: 12 oracle scenes and 2 real photos stored (one scene published); round 2: a copy of each
    kind of three stored pictures, 6 new scenes and 2 new photos."""
    root = tmp_path_factory.mktemp("near_duplicates")
    run("scenes", "make", "--n", "12", "--seed", "2", "--out", "round1", cwd=root)
    photos = sorted(require_shared_data("coco-mini-train", "train2017").glob("*.jpg"))[:4]
    (root / "photos1").mkdir()
    for photo in photos[:2]:
        (root / "photos1" / photo.name).write_bytes(photo.read_bytes())
    first = [run("ingest", "round1/manifest.jsonl", cwd=root).stdout, run("ingest", "photos1", cwd=root).stdout]
    scenes = sorted((root / "round1").rglob("*.png"))
    db = f"sqlite:///{root / 'bench' / 'benchsmith.db'}"
    with Store(db) as store:
        store.set_item_status([hashlib.sha256(scenes[0].read_bytes()).hexdigest()], "published")

    run("scenes", "make", "--n", "6", "--seed", "3", "--out", "round2", cwd=root)
    (root / "copies").mkdir()
    originals = {}
    for n, source in enumerate([scenes[0], scenes[5], photos[0]]):
        for kind, data in copies_of(Image.open(source)).items():
            name = f"{n}_{kind}.jpg"
            (root / "copies" / name).write_bytes(data)
            originals[name] = hashlib.sha256(source.read_bytes()).hexdigest()
    for photo in photos[2:]:
        (root / "copies" / photo.name).write_bytes(photo.read_bytes())
    # the same scene from another source, with the truth it was drawn from: its truth does not set it apart
    (root / "with_truth").mkdir()
    row = next(r for r in map(json.loads, (root / "round1" / "manifest.jsonl").read_text().splitlines())
               if r.get("path") and (root / "round1" / r["path"]).resolve() == scenes[1].resolve())
    (root / "with_truth" / "again.jpg").write_bytes(copies_of(Image.open(scenes[1]))["q85"])
    (root / "with_truth" / "manifest.jsonl").write_text(json.dumps(row | {"path": "again.jpg"}) + "\n")
    originals["again.jpg"] = hashlib.sha256(scenes[1].read_bytes()).hexdigest()
    second = [run("ingest", "round2/manifest.jsonl", cwd=root).stdout, run("ingest", "copies", cwd=root).stdout,
              run("ingest", "with_truth/manifest.jsonl", cwd=root).stdout]
    with Store(db) as store:
        refused = {v.subject_id.rpartition(":")[2]: v for v in store.get_verdicts(stage="ingest", passed=False)}
        stored = store.image_hashes()
    return first, second, originals, refused, stored


def test_copies_of_stored_pictures_are_refused_naming_the_original_and_the_distance(ingested):
    _first, second, originals, refused, _stored = ingested
    assert set(refused) == set(originals), "refused: " + json.dumps({k: v.reason for k, v in refused.items()})
    for name, verdict in refused.items():
        assert verdict.rule == "near_duplicate" and verdict.details["original"] == originals[name]
        assert verdict.details["distance"] <= 10 and verdict.details["detail"] <= 10
        assert originals[name] in verdict.reason and "perceptual-hash distance" in verdict.reason
    assert f"{len(originals) - 1} refused ({len(originals) - 1} near_duplicate)" in second[1]
    assert "1 refused (1 near_duplicate)" in second[2]


def test_distinct_pictures_still_come_in_even_oracle_scenes_alike_by_design(ingested):
    first, second, _originals, _refused, stored = ingested
    assert "12 added" in first[0] and "2 added" in first[1]
    assert "6 added" in second[0] and "2 added" in second[1]
    assert len(stored) == 12 + 2 + 6 + 2 and all(len(phash) == 16 for _id, _name, _path, phash in stored)
