"""COCO photos end to end through the installed command: ingest a COCO instances JSON with its captions as
caption-matching annotations, extract, generate (programmatic and reform), filter, publish. Every kept key
is checked against the COCO file by this test's own reading of it, and the release loads offline, in the
real lmms-eval (a scripted model answering what the COCO truth says scores 100%) and as VLMEvalKit reads
it, like the others; a photo that came with a GPS position is published without it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter

import datasets
import pytest

from benchsmith.settings import load_settings
from benchsmith.store import Store
from tests.generators.test_cli import run
from tests.publish.conftest import accept
from publish.lmms_eval import task_name
from tests.publish.conftest import GPS
from tests.publish.test_lmms_eval_task import SUPPORT, lmms_eval_cli  # noqa: F401 - the fixture
from tests.publish.test_release import vlmevalkit_image_files
from tests.support.shared_data import require_shared_data

PHOTOS = 24
PERSON = {"man", "men", "woman", "women", "boy", "boys", "girl", "girls", "child", "children", "kid", "kids",
          "people", "lady", "guy", "player", "skier", "surfer", "skateboarder", "snowboarder", "baby", "toddler"}
REGIONS = {(r, c): "centre" if (r, c) == (1, 1) else f"{('top', 'middle', 'bottom')[r]} {('left', 'centre', 'right')[c]}"
           for r in range(3) for c in range(3)}


def sample(tmp_path, photos: int = PHOTOS, gps: bool = True) -> tuple[dict, dict, str]:
    """The first `photos` photos of coco-mini-train, as their own instances and captions JSON files, and copies
    of the photos, the richest given a GPS position in its EXIF as a phone would (with `gps`)."""
    from PIL import Image as PILImage

    root = require_shared_data("coco-mini-train", "annotations")
    instances = json.loads((root / "instances_train2017.json").read_text())
    captions = json.loads((root / "captions_train2017.json").read_text())
    images = sorted(instances["images"], key=lambda i: i["file_name"])[:photos]
    ids = {i["id"] for i in images}
    mine = instances | {"images": images, "annotations": [a for a in instances["annotations"] if a["image_id"] in ids]}
    said = captions | {"images": images, "annotations": [a for a in captions["annotations"] if a["image_id"] in ids]}
    (tmp_path / "annotations").mkdir(exist_ok=True)
    (tmp_path / "annotations" / "instances_train2017.json").write_text(json.dumps(mine))
    (tmp_path / "annotations" / "captions_train2017.json").write_text(json.dumps(said))
    names = {c["id"]: c["name"] for c in instances["categories"]}
    truth = {i["file_name"]: {"size": (i["width"], i["height"]), "boxes": [], "captions": []} for i in images}
    by_id = {i["id"]: i["file_name"] for i in images}
    for a in mine["annotations"]:
        truth[by_id[a["image_id"]]]["boxes"].append((names[a["category_id"]], a["bbox"], a["iscrowd"]))
    for a in said["annotations"]:
        truth[by_id[a["image_id"]]]["captions"].append(a["caption"])
    folder = tmp_path / "train2017"
    folder.mkdir(exist_ok=True)
    located = max(truth, key=lambda name: (len(truth[name]["boxes"]), name))   # rich enough to be asked about
    for image in images:
        source = root.parent / "train2017" / image["file_name"]
        if image["file_name"] != located or not gps:
            shutil.copyfile(source, folder / image["file_name"])
            continue
        exif = PILImage.Exif()
        exif[0x8825] = GPS
        with PILImage.open(source) as photo:
            photo.save(folder / image["file_name"], "JPEG", quality=95, exif=exif.tobytes())
    return truth, names, located


def true_options(text: str, options: list[str], photo: dict, names: dict) -> list[bool]:
    """Which options the COCO boxes make true, read from the question's words alone."""
    boxes, (width, height) = photo["boxes"], photo["size"]
    spoken = {**{n: n for n in names.values()}, "people": "person", "tvs": "tv", "broccoli": "broccoli",
              "knives": "knife", "mice": "mouse"}

    def label(words: str) -> str:
        words = words.lower()
        return spoken.get(words) or spoken.get(words[:-1]) or spoken.get(words[:-2]) or words

    def only(words: str):
        [found] = [b for b in boxes if b[0] == label(words)]
        assert not found[2], "a crowd region asked about"
        return found[1]

    if m := re.fullmatch(r"How many (.+) are there in the image\?", text):
        found = [b for b in boxes if b[0] == label(m[1])]
        assert not any(b[2] for b in found)
        return [o == str(len(found)) for o in options]
    if m := re.fullmatch(r"In which part of the image (?:is|are) the (.+)\?", text):
        x, y, w, h = only(m[1])
        cell = (min(int((y + h / 2) / height * 3), 2), min(int((x + w / 2) / width * 3), 2))
        return [o == REGIONS[cell] for o in options]
    if m := re.fullmatch(r"Where (?:is|are) the (.+) relative to the (.+)\?", text):
        (ax, ay, aw, ah), (bx, by, bw, bh) = only(m[1]), only(m[2])
        holds = {"to its left": ax + aw <= bx, "to its right": ax >= bx + bw, "above it": ay + ah <= by,
                 "below it": ay >= by + bh}
        return [holds[o] for o in options]
    if text == "Which of these can be seen in the image?":
        return [label(o) in {b[0] for b in boxes} for o in options]

    def of(option):
        return [b for b in boxes if b[0] == label(option)]
    if m := re.fullmatch(r"Which of these (?:is|are) there exactly (\w+) of in the image\?", text):
        n = ("one", "two", "three", "four", "five", "six").index(m[1]) + 1
        return [len(of(o)) == n and not any(b[2] for b in of(o)) for o in options]
    if m := re.fullmatch(r"Which of these is in the (.+) of the image\?", text):
        return [any(REGIONS[(min(int((y + h / 2) / height * 3), 2), min(int((x + w / 2) / width * 3), 2))] == m[1]
                    for _l, (x, y, w, h), _c in of(o)) for o in options]
    if m := re.fullmatch(r"Which of these is (to the left of|to the right of|above|below) the (.+)\?", text):
        bx, by, bw, bh = only(m[2])
        side = {"to the left of": lambda x, y, w, h: x + w <= bx, "to the right of": lambda x, y, w, h: x >= bx + bw,
                "above": lambda x, y, w, h: y + h <= by, "below": lambda x, y, w, h: y >= by + bh}[m[1]]
        return [any(side(*box) for _l, box, _c in of(o)) for o in options]
    if text == "Which sentence describes the image?":   # COCO boxes every instance of its classes
        own = {" ".join(c.lower().split()) for c in photo["captions"]}
        return [" ".join(o.lower().split()) in own or not lacked(o, boxes, names) for o in options]
    raise AssertionError(f"a question the checker cannot read: {text}")


def lacked(caption: str, boxes: list, names: dict) -> set[str]:
    """The COCO classes `caption` names (the name or its plural, a word for a person) that no box holds."""
    text = f" {' '.join(re.findall(r'[a-z]+', caption.lower()))} "
    named = {n for n in names.values() if f" {n} " in text or f" {n}s " in text or f" {n}es " in text}
    named |= {"person"} if PERSON & set(text.split()) else set()
    named -= {n for n in named for m in named if n != m and n in m}   # "dog" within "hot dog"
    return named - {b[0] for b in boxes}


def answer_letter(row: dict, truth: dict, names: dict) -> str:
    options = [row[f"choice_{letter}"] for letter in "abcd"]
    true = true_options(row["question"], options, truth, names)
    assert true.count(True) == 1, (row["question"], options)
    return "ABCD"[true.index(True)]


@pytest.mark.slow(seconds=300)
@pytest.mark.lmms_eval
def test_coco_photos_in_exact_questions_out_and_a_release_that_loads(tmp_path, lmms_eval_cli):
    truth, names, located = sample(tmp_path)
    steps = [["ingest", "annotations/instances_train2017.json", "--images", "train2017", "--task", "matching"],
             ["extract"], ["generate", "-g", "programmatic", "-g", "reform"], ["filter"]]
    for step in steps:
        done = run(tmp_path, *step, BENCHSMITH__EXTRACT__USE='["supplied"]')
        assert done.returncode == 0, f"{step}: {done.stdout[-2000:]}{done.stderr[-2000:]}"

    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(tmp_path / "bench")})
    with Store(settings.db_url) as store:
        photos = {item.id: item.original_name for item in store.get_items(kind="image")}
        kept = store.get_questions(status="candidate")
        assert set(photos.values()) <= truth.keys() and len(kept) >= 20  # photos too plain for richness wait
        wrong = []
        for q in kept:
            true = true_options(q.text, q.options, truth[photos[q.item_id]], names)
            if true != [i == q.answer for i in range(4)]:
                wrong.append((q.text, q.options, q.answer, true))
        assert not wrong, wrong[:5]
        # each caption in one question at most (generate.reform.caption_uses): on 24 photos about ten
        assert sum(q.text == "Which sentence describes the image?" for q in kept) >= 8
        for q in kept:
            accept(store, q, [q.answer])
    by_id = {q.id: q for q in kept}

    done = run(tmp_path, "publish", "--version", "v1")
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "bench" / "releases" / "v1"
    rows = datasets.load_dataset(str(folder), split="test", cache_dir=str(tmp_path / "cache"))
    assert sorted(rows["question_id"]) == sorted(q.id for q in kept)
    [tsv] = (folder / "vlmevalkit").glob("*.tsv")
    files = vlmevalkit_image_files(tsv, tmp_path / "vlmevalkit_images")
    assert files.keys() == {q.id for q in kept} and all(p.is_file() for paths in files.values() for p in paths)
    with_gps = [row for row in rows if photos[by_id[row["question_id"]].item_id] == located]
    assert with_gps   # the photo that came with a GPS position is published, without it
    for row in rows:
        assert all(len(image.getexif()) == 0 and "exif" not in image.info for image in row["image"])

    # the real lmms-eval, its task read from the release: a model answering what the COCO truth says scores 100%
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({row["question_id"]: answer_letter(row, truth[photos[by_id[row["question_id"]].item_id]],
                                                                     names) for row in rows}))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
            "LMMS_EVAL_PLUGINS": "scripted_lmms", "PYTHONPATH": str(SUPPORT)}
    task = task_name("benchsmith-bench", "v1")
    done = subprocess.run([str(lmms_eval_cli), "--model", "scripted", "--model_args", f"replies={replies}",
                           "--tasks", task, "--include_path", str(folder / "lmms_eval"),
                           "--output_path", str(tmp_path / "out"), "--batch_size", "1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    written = list((tmp_path / "out").rglob("*_results.json"))
    assert done.returncode == 0 and len(written) == 1, (done.stdout + done.stderr)[-3000:]
    reported = json.loads(written[0].read_text())["results"][task]
    assert reported["accuracy,none"] == 1.0 and reported["dim_image_text_matching,none"] == 1.0


@pytest.mark.slow(seconds=200)
def test_photos_added_later_never_reuse_a_caption_the_stored_questions_show(tmp_path):
    """A maintainer grows the benchmark: twelve photos first, twelve more a month later. The new photos'
    caption questions are planned around the captions the stored ones already show, so each caption is
    still in one question at most (generate.reform.caption_uses), and the stored questions stay as they are."""
    def matching(store):
        return {q.id: q for q in store.get_questions()
                if q.status not in ("dropped", "superseded") and q.meta.get("task") == "matching"}

    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(tmp_path / "bench")})
    for photos in (12, 24):
        sample(tmp_path, photos, gps=False)
        for step in (["ingest", "annotations/instances_train2017.json", "--images", "train2017", "--task", "matching"],
                     ["generate", "-g", "reform"]):
            done = run(tmp_path, *step)
            assert done.returncode == 0, f"{step}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        with Store(settings.db_url) as store:
            if photos == 12:
                first = matching(store)
            else:
                grown = matching(store)
    assert first and first.keys() < grown.keys() and len(grown) >= 8
    texts = Counter(" ".join(o.casefold().split()) for q in grown.values() for o in q.options)
    assert texts.most_common(1)[0][1] == 1, texts.most_common(3)
