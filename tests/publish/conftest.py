"""A store that has been through review: oracle scenes with truth-derived questions, some accepted with
scripted reviews (one where the annotators overrule the generator's answer, one where they move the
question to another dimension), some dropped, rejected or still in review; one photo carrying EXIF GPS;
one rendered table page with an exact text-rich question; one video whose sampled frames are the
images of its question; and one set of three images with a question that numbers them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from PIL import Image as PILImage

from benchsmith.dimensions import registry
from generators.textrich import Pools, TextRichSettings, generate
from ingest.sources import candidates_for
from ingest.stage import ingest
from ingest.textrich import make_pages
from benchsmith.records import Image, ImageSet, Provenance, Question, Review, Video, stable_hash
from benchsmith.store import Store

GENERATOR = Provenance(backend="programmatic", model=None, prompt_version="t1")
LLM = Provenance(backend="llm", model="/home/someone/models/qwen-7b", prompt_version="p3")
GPS = {1: "N", 2: (52.0, 31.0, 12.0), 3: "E", 4: (13.0, 24.0, 36.0)}
SERIAL = "CAM-SERIAL-0042"


@dataclass
class Reviewed:
    """What the fixture put in the store, so tests can check the release against it."""

    store: Store
    settings: object
    truth: dict[str, dict] = field(default_factory=dict)          # question id -> the right option's text
    accepted: dict[int, set[str]] = field(default_factory=dict)   # published dimension -> question ids
    not_accepted: set[str] = field(default_factory=set)
    overruled: str = ""         # generator answer wrong, annotators right
    moved: str = ""             # annotators changed the dimension
    gps_item: str = ""
    page_question: str = ""     # a text-rich dimension (16) on a rendered table
    video_question: str = ""
    set_question: str = ""      # about three images: yellow, purple, cyan in this order

    @property
    def accepted_ids(self) -> set[str]:
        return set().union(*self.accepted.values())


def counting_question(item_id: str, shape: str, n: int, *, wrong: bool = False) -> Question:
    options = [str(max(n, 1) + k) for k in (-1, 0, 1, 2)]
    right = options.index(str(n))
    return Question(item_id=item_id, dimension_id=5, text=f"How many {shape}s are in the picture?",
                    options=options, answer=(right + 1) % 4 if wrong else right, provenance=GENERATOR)


def word_question(item_id: str, word: str, others: list[str]) -> Question:
    options = sorted({word, *[w for w in others if w != word][:3]})
    return Question(item_id=item_id, dimension_id=9, text="Which word is written on a sign?", options=options,
                    answer=options.index(word), provenance=LLM)


def add_reviews(store: Store, question_id: str, answers: list[int | None], dimension_id: int | None = None) -> None:
    """Reviews as the annotation pull stores them: one per annotator; None is a discard."""
    task = int(question_id[:6], 16)   # one Label Studio task per question
    store.add_reviews([Review(question_id=question_id, task_id=task, annotation_id=task * 10 + k, annotator=f"a{k}",
                              answer=answer, dimension_id=dimension_id, keep=answer is not None,
                              reasons=[] if answer is not None else ["ambiguous"])
                       for k, answer in enumerate(answers)])


def accept(store: Store, question: Question, answers: list[int | None], *, review_answer: int | None = None,
           review_dimension_id: int | None = None) -> None:
    store.move("question", [question.id], "in_review", stage="review")
    add_reviews(store, question.id, answers, review_dimension_id)
    store.update_reviewed("question", {question.id: {"review_answer": review_answer, "review_dimension_id": review_dimension_id}})
    store.move("question", [question.id], "accepted", stage="review")


def gps_photo(folder: Path) -> Path:
    """A JPEG straight from a 'camera': GPS position and body serial number in its EXIF."""
    from skimage import data

    img = PILImage.fromarray(data.astronaut()).resize((96, 96))
    exif = PILImage.Exif()
    exif[0x010F] = "ExampleCam"
    exif[0x8825] = GPS
    exif[0x8769] = {0xA431: SERIAL}
    folder.mkdir(parents=True, exist_ok=True)
    img.save(folder / "holiday.jpg", "JPEG", exif=exif.tobytes(), quality=90)
    row = {"path": "holiday.jpg", "source": "camera-roll",
           "objects": [{"label": "person", "box": [0.1, 0.1, 0.9, 0.9]}]}
    (folder / "manifest.jsonl").write_text(json.dumps(row) + "\n")
    return folder / "manifest.jsonl"


def add_video(store: Store, media_dir: Path, colours: list[str]) -> Video:
    frames = []
    for k, colour in enumerate(colours):
        relative = f"frames/clip/{k:03d}.png"
        (media_dir / relative).parent.mkdir(parents=True, exist_ok=True)
        PILImage.new("RGB", (64, 48), colour).save(media_dir / relative)
        frames.append(relative)
    video = Video(id=stable_hash("clip", length=64), path="videos/clip.mp4", width=64, height=48, fps=2.0,
                  n_frames=len(colours), frames=frames, source="clips")
    store.add_items([video])
    return video


def add_image_set(store: Store, media_dir: Path, colours: list[str]) -> ImageSet:
    members = []
    for k, colour in enumerate(colours):
        relative = f"images/set/{colour}.png"
        (media_dir / relative).parent.mkdir(parents=True, exist_ok=True)
        PILImage.new("RGB", (40, 30), colour).save(media_dir / relative)
        members.append(Image(id=stable_hash("set image", colour, length=64), path=relative, width=40, height=30,
                             source="sets"))
    image_set = ImageSet.of(members, source="sets")
    store.add_items([*members, image_set])
    return image_set


def build_reviewed(store: Store, settings, oracle_dir: Path, tmp_path: Path) -> Reviewed:
    out = Reviewed(store=store, settings=settings)
    ingest(store, settings.media_dir, candidates_for(oracle_dir / "manifest.jsonl"), settings.ingest, label="oracle")
    ingest(store, settings.media_dir, candidates_for(gps_photo(tmp_path / "photos")), settings.ingest, label="photos")
    ingest(store, settings.media_dir, candidates_for(make_pages(tmp_path / "pages", "table", 1)), settings.ingest,
           label="pages")
    items = {item.original_name: item for item in store.get_items()}
    all_words = sorted({w for item in items.values() for w in item.annotations.get("truth", {}).get("words", [])})

    def keep(question: Question, dimension: int, right: str) -> None:
        out.truth[question.id] = {"right": right, "item": question.item_id}
        out.accepted.setdefault(dimension, set()).add(question.id)

    for index, item in enumerate(sorted((i for i in items.values() if "truth" in i.annotations),
                                        key=lambda i: i.original_name)[:12]):
        truth = item.annotations["truth"]
        shape, n = sorted(truth["counts"].items())[0]
        counting = counting_question(item.id, shape, n, wrong=index == 0)
        words = truth["words"]
        reading = word_question(item.id, words[0], all_words) if words else None
        store.add_questions([q for q in (counting, reading) if q], stage="generate")
        right = counting.options.index(str(n))
        if index == 0:      # the generator got it wrong; two of three annotators fix it
            accept(store, counting, [right, right, counting.answer], review_answer=right)
            out.overruled = counting.id
            keep(counting, 5, str(n))
        elif index == 1:    # annotators say it is really about identity
            accept(store, counting, [right, right], review_answer=right, review_dimension_id=2)
            out.moved = counting.id
            keep(counting, 2, str(n))
        elif index % 5 == 4:
            store.move("question", [counting.id], "dropped", stage="filter", reason="blind solver answered")
            out.not_accepted.add(counting.id)
        else:
            accept(store, counting, [right] * (1 + index % 3))
            keep(counting, 5, str(n))
        if reading is None:
            continue
        if index % 3 == 2:
            store.move("question", [reading.id], "in_review", stage="review")
            store.move("question", [reading.id], "rejected", stage="review")
            out.not_accepted.add(reading.id)
        elif index % 4 == 3:
            store.move("question", [reading.id], "in_review", stage="review")
            out.not_accepted.add(reading.id)
        else:
            accept(store, reading, [])
            keep(reading, 9, words[0])

    photo = items["holiday.jpg"]
    person = Question(item_id=photo.id, dimension_id=2, text="What is in the picture?",
                      options=["a person", "a dog", "a car", "a tree"], answer=0, provenance=GENERATOR)
    store.add_questions([person], stage="generate")
    accept(store, person, [0, 0])
    keep(person, 2, "a person")
    out.gps_item = photo.id

    [page] = [item for item in store.get_items() if item.source == "benchsmith-textrich"]
    [lookup] = generate(page, registry().get("chart_retrieval"), Pools.of([page.annotations["truth"]]),
                        TextRichSettings(per_dimension=1))
    store.add_questions([lookup], stage="generate")
    accept(store, lookup, [lookup.answer, lookup.answer])
    keep(lookup, 16, lookup.options[lookup.answer])
    out.page_question = lookup.id

    video = add_video(store, settings.media_dir, ["red", "green", "blue"])
    order = Question(item_id=video.id, dimension_id=10, text="Which colour does the clip end on?",
                     options=["blue", "green", "red", "white"], answer=0, provenance=GENERATOR)
    store.add_questions([order], stage="generate")
    accept(store, order, [0])
    keep(order, 10, "blue")
    out.video_question = order.id

    image_set = add_image_set(store, settings.media_dir, ["yellow", "purple", "cyan"])
    odd = Question(item_id=image_set.id, dimension_id=28, text="Which image is purple?",
                   options=["image 1", "image 2", "image 3", "none of them"], answer=1, provenance=GENERATOR)
    store.add_questions([odd], stage="generate")
    accept(store, odd, [1, 1])
    keep(odd, 28, "image 2")
    out.set_question = odd.id
    return out


@pytest.fixture
def reviewed(settings, oracle_dir, tmp_path) -> Reviewed:
    with Store(settings.db_url) as store:
        yield build_reviewed(store, settings, oracle_dir, tmp_path)

