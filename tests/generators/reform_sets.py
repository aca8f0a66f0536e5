"""Small annotated datasets in the public schemas the reform generator reads, written the way users get
them: Hugging Face datasets saved with `save_to_disk`, and JSONL manifests beside their images.

- VQAv2 (HF: image, question_id, question, question_type, answer_type, multiple_choice_answer, answers
  as ten {answer, answer_confidence, answer_id}); GQA (JSONL: imageId, question, answer, fullAnswer,
  types); TextVQA (JSONL: question_id, question, answers as ten strings, ocr_tokens);
- ImageNet (HF: image, label as a ClassLabel whose names hold comma-separated synonyms); Places (JSONL:
  scene_category);
- COCO captions, Karpathy style (HF: image, cocoid, sentences as five strings);
- RefCOCO (HF: image, ref_id, ann_id, category_id, bbox as COCO x, y, w, h in pixels, sentences as
  {raw, sent, sent_id}), several referents per image;
- OCR ground truth (JSONL: image_id, ocr as [{text, box}] lines).

Every row's truth is returned beside the files, so a test can check the questions against it without
the generator's code.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image as PILImage

COLOURS = ["red", "blue", "green", "yellow", "white", "black", "brown", "orange", "purple", "grey"]
ANIMALS = ["dog", "cat", "horse", "cow", "sheep", "zebra", "giraffe", "elephant", "bear", "bird"]
SPORTS = ["tennis", "baseball", "soccer", "skiing", "surfing", "skateboarding", "frisbee", "golf"]
CLASSES = ["tench, Tinca tinca", "goldfish, Carassius auratus", "great white shark, white shark",
           "tiger shark, Galeocerdo cuvieri", "hammerhead, hammerhead shark", "electric ray, crampfish",
           "stingray", "cock", "hen", "ostrich, Struthio camelus", "brambling, Fringilla montifringilla",
           "goldfinch, Carduelis carduelis", "house finch, linnet", "junco, snowbird", "indigo bunting",
           "robin, American robin", "bulbul", "jay", "magpie", "chickadee"]
SCENES = ["kitchen", "bathroom", "bedroom", "living room", "beach", "forest", "mountain", "street",
          "office", "library", "airport terminal", "train station"]
WORDS = ["STOP", "STOPS", "SHOP", "OPEN", "OPENS", "EXIT", "EXITS", "SALE", "SALT", "MARKET", "MARKETS",
         "BAKERY", "BANK", "BANKS", "CAFE", "CAFES", "HOTEL", "HOTELS", "PARKING", "PARKS", "ONE WAY",
         "BUS STOP", "POLICE", "PHARMACY", "FARMACY"]
CATEGORIES = {1: "person", 3: "car", 18: "dog", 62: "chair"}


def image(path: Path, seed: int, size: tuple[int, int] = (96, 72)) -> PILImage.Image:
    """A small picture of its own (random blocks), so no two images share bytes."""
    rng = random.Random(seed)
    img = PILImage.new("RGB", size, tuple(rng.randrange(256) for _ in range(3)))
    for _ in range(6):
        x, y = rng.randrange(size[0] - 8), rng.randrange(size[1] - 8)
        img.paste(tuple(rng.randrange(256) for _ in range(3)), (x, y, x + 8, y + 8))
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return img


@dataclass
class Truth:
    """What a test needs to judge a question: the right answer and everything annotators accepted."""

    key: str
    accepted: list[str]
    task: str


@dataclass
class Sets:
    root: Path
    sources: list[tuple[Path, str]] = field(default_factory=list)   # (path, task given on the command line or "")
    truth: dict[tuple[str, str], Truth] = field(default_factory=dict)  # (dataset, annotation id) -> truth


def _save_hf(rows: list[dict], images: list[Path], out: Path, features=None) -> Path:
    import datasets

    columns = {k: [r[k] for r in rows] for k in rows[0]}
    columns["image"] = [str(p) for p in images]
    table = datasets.Dataset.from_dict(columns, features=features)
    table = table.cast_column("image", datasets.Image())
    table.save_to_disk(str(out))
    return out


def _write_jsonl(rows: list[dict], out: Path) -> Path:
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return out


def vqav2(sets: Sets, n_images: int = 24) -> None:
    """Three questions per image (colour, animal, count); annotators mostly agree, some differ or write
    variants ('Red.', 'reds'); one image's questions are tied and broken by multiple_choice_answer."""
    rng = random.Random(1)
    folder = sets.root / "vqav2"
    rows, images = [], []
    for i in range(n_images):
        path = folder / "img" / f"COCO_val2014_{i:012d}.png"
        image(path, 100 + i)
        colour, animal, count = COLOURS[i % 10], ANIMALS[(i * 3) % 10], i % 6
        other_colour = COLOURS[(i + 3) % 10]
        for qid, question, qtype, atype, given in (
                (i * 10 + 1, f"What color is the {rng.choice(['car', 'bus', 'kite'])}?", "what color is the", "other",
                 [colour] * 6 + [colour.capitalize() + ".", colour + "s", other_colour, other_colour]),
                (i * 10 + 2, "What animal is in the picture?", "what animal is", "other",
                 [animal] * 7 + ["a " + animal, animal + "s", "animal"]),
                (i * 10 + 3, "How many people are in the photo?", "how many", "number",
                 [str(count)] * 5 + [["zero", "one", "two", "three", "four", "five"][count]] * 2
                 + [str(count + 1)] * 3)):
            answers = [{"answer": a, "answer_confidence": "yes", "answer_id": k + 1} for k, a in enumerate(given)]
            majority = given[0]
            if i == 0 and qid % 10 == 1:  # a tie, five and five: VQAv2's multiple_choice_answer decides
                given = [colour] * 5 + [other_colour] * 5
                answers = [{"answer": a, "answer_confidence": "maybe", "answer_id": k + 1} for k, a in enumerate(given)]
                majority = other_colour
            rows.append({"question_id": qid, "image_id": i, "question": question, "question_type": qtype,
                         "answer_type": atype, "multiple_choice_answer": majority, "answers": answers})
            images.append(path)
            sets.truth[("vqav2", str(qid))] = Truth(majority, given, "vqa")
    sets.sources.append((_save_hf([r | {"task": "vqa", "source": "vqav2"} for r in rows], images, folder / "dataset"),
                         ""))


def gqa(sets: Sets, n_images: int = 16) -> None:
    folder = sets.root / "gqa"
    rows = []
    for i in range(n_images):
        image(folder / f"n{i:06d}.jpg", 300 + i)
        sport = SPORTS[i % len(SPORTS)]
        rows.append({"path": f"n{i:06d}.jpg", "task": "vqa", "source": "gqa", "id": f"g{i}",
                     "imageId": f"n{i:06d}", "question": "Which sport is being played?", "answer": sport,
                     "fullAnswer": f"The sport is {sport}.",
                     "types": {"structural": "query", "semantic": "rel", "detailed": "activityWho"}})
        sets.truth[("gqa", f"g{i}")] = Truth(sport, [sport], "vqa")
    sets.sources.append((_write_jsonl(rows, folder / "gqa.jsonl"), ""))


def textvqa(sets: Sets, n_images: int = 12) -> None:
    """TextVQA rows, the `task` given on the command line; one row has no answers at all."""
    folder = sets.root / "textvqa"
    rows = []
    for i in range(n_images):
        image(folder / "train_images" / f"{i:016x}.jpg", 500 + i)
        word = WORDS[i % len(WORDS)].lower()
        answers = [word] * 8 + [word.upper(), "unanswerable"] if i else []
        rows.append({"path": f"train_images/{i:016x}.jpg", "source": "textvqa", "question_id": 34602 + i,
                     "question": "what does the sign say?", "answers": answers, "ocr_tokens": [word]})
        if answers:
            sets.truth[("textvqa", str(34602 + i))] = Truth(word, answers, "vqa")
    sets.sources.append((_write_jsonl(rows, folder / "textvqa.jsonl"), "vqa"))


def imagenet(sets: Sets, n_images: int = 30) -> None:
    import datasets

    folder = sets.root / "imagenet"
    rows, images = [], []
    for i in range(n_images):
        path = folder / "val" / f"ILSVRC2012_val_{i:08d}.JPEG.png"
        image(path, 700 + i)
        label = (i * 7) % len(CLASSES)
        rows.append({"label": label, "id": f"ILSVRC2012_val_{i:08d}", "source": "imagenet"})
        images.append(path)
        sets.truth[("imagenet", f"ILSVRC2012_val_{i:08d}")] = Truth(CLASSES[label], CLASSES[label].split(", "),
                                                                     "classification")
    features = datasets.Features({"label": datasets.ClassLabel(names=CLASSES), "id": datasets.Value("string"),
                                  "source": datasets.Value("string"), "image": datasets.Value("string")})
    sets.sources.append((_save_hf(rows, images, folder / "dataset", features), "classification"))


def places(sets: Sets, n_images: int = 18) -> None:
    folder = sets.root / "places"
    rows = []
    for i in range(n_images):
        image(folder / f"Places365_val_{i:08d}.jpg", 900 + i)
        scene = SCENES[i % len(SCENES)]
        rows.append({"path": f"Places365_val_{i:08d}.jpg", "task": "scene_classification", "source": "places365",
                     "id": f"p{i}", "scene_category": scene})
        sets.truth[("places365", f"p{i}")] = Truth(scene, [scene], "scene_classification")
    sets.sources.append((_write_jsonl(rows, folder / "places.jsonl"), ""))


def coco_captions(sets: Sets, n_images: int = 24) -> None:
    """Five captions per image from a few templates, so other images' captions share many words."""
    rng = random.Random(3)
    folder = sets.root / "coco"
    rows, images = [], []
    people = ["a man", "a woman", "a young boy", "a little girl", "an old man", "two people"]
    doing = ["riding a bike", "walking a dog", "holding an umbrella", "eating a sandwich", "flying a kite",
             "throwing a frisbee"]
    places_ = ["down a busy street", "in a grassy park", "on a sandy beach", "next to a red car",
               "in front of a building", "under a large tree"]
    for i in range(n_images):
        path = folder / "val2014" / f"COCO_val2014_{100000 + i:012d}.png"
        image(path, 1100 + i)
        who, what, where = people[i % 6], doing[(i // 2) % 6], places_[(i * 5) % 6]
        sentences = [f"{who.capitalize()} {what} {where}.", f"{who.capitalize()} is {what} {where}",
                     f"There is {who} {what}.", f"{who.capitalize()} {what} while {rng.choice(['smiling', 'talking'])}.",
                     f"A photo of {who} {what} {where}."]
        rows.append({"cocoid": 100000 + i, "filename": path.name, "sentences": sentences})
        images.append(path)
        for k in range(3):   # one question keyed by each of the first `caption_keys` (3) captions
            sets.truth[("coco-karpathy", f"{100000 + i}#{k}")] = Truth(sentences[k], sentences, "matching")
    sets.sources.append((_save_hf([r | {"task": "matching", "source": "coco-karpathy"} for r in rows], images,
                                  folder / "dataset"), ""))


def refcoco(sets: Sets, n_images: int = 10) -> None:
    """Four referents per image (two of one category), each row carrying the image, as RefCOCO does."""
    folder = sets.root / "refcoco"
    rows, images = [], []
    w, h = 96, 72
    slots = [(4, 4, 30, 28), (50, 6, 36, 30), (8, 40, 28, 26), (56, 38, 34, 30)]
    for i in range(n_images):
        path = folder / "train2014" / f"COCO_train2014_{200000 + i:012d}.png"
        image(path, 1300 + i, (w, h))
        cats = [1, 1, 3 if i % 2 else 18, 62]
        for k, ((x, y, bw, bh), cat) in enumerate(zip(slots, cats)):
            ref = i * 10 + k
            # described by looks, not by position: box coordinates would give a position away without the image
            colour = COLOURS[(i + k * 3) % len(COLOURS)]
            sentences = [{"raw": f"{CATEGORIES[cat]} in {colour}", "sent": f"{CATEGORIES[cat]} in {colour}",
                          "sent_id": ref * 3},
                         {"raw": f"the {colour} {CATEGORIES[cat]}", "sent": f"the {colour} {CATEGORIES[cat]}",
                          "sent_id": ref * 3 + 1}]
            rows.append({"source": "refcoco", "ref_id": ref, "ann_id": 5000 + ref, "image_id": 200000 + i,
                         "category_id": cat,
                         "bbox": [float(x), float(y), float(bw), float(bh)], "sentences": sentences, "split": "val"})
            images.append(path)
            key = "({:.2f}, {:.2f}) to ({:.2f}, {:.2f})".format(x / w, y / h, (x + bw) / w, (y + bh) / h)
            for s in range(2):
                sets.truth[("refcoco", f"{ref}#{s}")] = Truth(key, [key], "grounding")
    sets.sources.append((_save_hf(rows, images, folder / "dataset"), "grounding"))


def ocr_truth(sets: Sets, n_images: int = 20) -> None:
    folder = sets.root / "ocr"
    rows = []
    for i in range(n_images):
        image(folder / f"img_{i}.png", 1500 + i)
        lines = [WORDS[i % len(WORDS)]] + ([WORDS[(i + 7) % len(WORDS)]] if i % 3 == 0 else [])
        rows.append({"path": f"img_{i}.png", "task": "text_reading", "source": "textocr", "image_id": f"t{i}",
                     "ocr": [{"text": t, "box": [0.1, 0.1, 0.5, 0.3]} for t in lines]})
        for k, text in enumerate(lines):
            sets.truth[("textocr", f"t{i}#{k}" if len(lines) > 1 else f"t{i}")] = Truth(text, lines, "text_reading")
    sets.sources.append((_write_jsonl(rows, folder / "ocr.jsonl"), ""))


def build(root: Path) -> Sets:
    sets = Sets(root)
    for make in (vqav2, gqa, textvqa, imagenet, places, coco_captions, refcoco, ocr_truth):
        make(sets)
    return sets
