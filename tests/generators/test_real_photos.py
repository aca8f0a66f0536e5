"""Programmatic questions on real photos: what the boxes and captions cannot settle is not asked, and labels
are spoken as English. Small inline facts; each test checks the question text against its own truth."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import yaml

from benchsmith.dimensions import registry
from benchsmith.records import Fact, Image, Provenance
from generators.programmatic import ProgrammaticSettings, generate, load_vocabulary, plural
from tests.support.shared_data import require_shared_data

SUPPLIED = Provenance(backend="supplied")
IMAGE = Image(id="photo", path="photo.jpg", width=640, height=480)


def obj(label, box, **attributes) -> Fact:
    return Fact(item_id=IMAGE.id, kind="object", text=label, box=box, attributes=attributes, provenance=SUPPLIED)


def caption(text) -> Fact:
    return Fact(item_id=IMAGE.id, kind="caption", text=text, provenance=SUPPLIED)


def ocr(text, box, backend="rapidocr", score=0.95, item=IMAGE.id) -> Fact:
    x1, y1, x2, y2 = box
    return Fact(item_id=item, kind="ocr", text=text, quad=((x1, y1), (x2, y1), (x2, y2), (x1, y2)), score=score,
                provenance=SUPPLIED if backend == "supplied" else Provenance(backend=backend))


def made(dimension, facts, vocabulary=None, **settings):
    return generate(IMAGE, facts, registry().get(dimension), vocabulary or load_vocabulary(),
                    ProgrammaticSettings(per_dimension=50, **settings), seed=3)


def asked(questions, template=None):
    return {q.text: q for q in questions if "dropped" not in q.meta and template in (None, q.meta["template"])}


def dropped(questions):
    return {q.text: q.meta["dropped"] for q in questions if "dropped" in q.meta}


# well apart, inside the frame, each large enough
APART = [(0.05 + 0.3 * i, 0.4, 0.2 + 0.3 * i, 0.6) for i in range(3)]


def test_a_clean_count_is_asked_with_the_number_of_boxes():
    questions = made("instances_counting", [obj("keyboard", box) for box in APART])
    q = asked(questions)["How many keyboards are there in the image?"]
    assert q.options[q.answer] == "3"


@pytest.mark.parametrize("extra, reason", [
    (obj("keyboard", (0.0, 0.0, 1.0, 1.0), crowd="true"), "crowd region"),
    (obj("keyboard", (0.5, 0.1, 0.52, 0.12)), "too small"),
    (obj("keyboard", (0.0, 0.1, 0.2, 0.3)), "cut by the image border"),
    (obj("keyboard", (0.19, 0.45, 0.3, 0.55)), "touch or overlap"),
])
def test_a_count_the_boxes_cannot_settle_is_dropped_with_its_reason(extra, reason):
    questions = made("instances_counting", [obj("keyboard", box) for box in APART] + [extra])
    assert "How many keyboards are there in the image?" not in asked(questions)
    assert reason in dropped(questions)["How many keyboards are there in the image?"]


def test_a_crowd_region_is_never_a_describing_attribute_nor_the_one_object_of_its_label():
    facts = [obj("person", APART[0]), obj("person", (0.6, 0.1, 0.9, 0.3), crowd="true"), obj("dog", APART[2])]
    texts = [q.text for key in ("instance_location", "spatial_relation", "instance_attributes", "instance_identity")
             for q in made(key, facts)]
    assert texts and not [t for t in texts if "crowd" in t or "person" in t and "Where" in t]
    assert "In which part of the image is the person?" not in texts


@pytest.mark.parametrize("captions, kept", [
    (["Two keyboards sit on a desk."], False),
    (["A desk with several keyboards and a mouse."], False),
    (["Three keyboards sit on a desk."], True),
    (["A desk with keyboards on it."], True),
])
def test_a_count_a_caption_contradicts_is_not_asked(captions, kept):
    questions = made("instances_counting", [obj("keyboard", box) for box in APART] + [caption(c) for c in captions])
    assert ("How many keyboards are there in the image?" in asked(questions)) is kept
    if not kept:
        assert "caption" in dropped(questions)["How many keyboards are there in the image?"]


def test_an_absent_label_a_caption_names_is_neither_counted_as_zero_nor_a_wrong_option():
    vocabulary = load_vocabulary()
    vocabulary = type(vocabulary)(**{**vocabulary.__dict__, "labels": ("cup", "dining table", "dog", "bench", "cat")})
    facts = [obj("cup", APART[0]), caption("Two cups sit on a wooden table.")]
    for _ in range(3):
        identity = made("instance_identity", facts, vocabulary)
        assert identity and all("dining table" not in q.options for q in identity)
    counts = made("instances_counting", facts, vocabulary)
    assert "How many dining tables are there in the image?" not in asked(counts)


def test_how_many_objects_only_where_every_object_is_labelled():
    facts = [obj("cup", APART[0]), obj("dog", APART[1])]
    assert not [q for q in made("instances_counting", facts) if q.meta.get("filter") == {}]
    everything = [q for q in made("instances_counting", facts, labels_exhaustive=True) if q.meta.get("filter") == {}]
    assert [q.text for q in everything] == ["How many objects are there in the image?"]


def _region(x: float, y: float) -> str:
    row, column = min(int(y * 3), 2), min(int(x * 3), 2)
    return "centre" if (row, column) == (1, 1) else f"{('top', 'middle', 'bottom')[row]} {('left', 'centre', 'right')[column]}"


def test_a_box_that_fills_or_straddles_regions_is_not_located_and_one_inside_a_region_is():
    facts = [obj("dining table", (0.0, 0.0, 1.0, 1.0)), obj("knife", (0.1, 0.75, 0.66, 0.85)),
             obj("cup", (0.72, 0.05, 0.9, 0.25)), obj("skis", (0.05, 0.4, 0.28, 0.6))]
    questions = made("instance_location", facts)
    kept = asked(questions, "location")
    assert set(kept) == {"In which part of the image is the cup?", "In which part of the image are the skis?"}
    assert kept["In which part of the image is the cup?"].options[kept["In which part of the image is the cup?"].answer] \
        == _region(0.81, 0.15)
    assert {"In which part of the image is the dining table?", "In which part of the image is the knife?"} \
        <= set(dropped(questions))


def test_spatial_relations_need_apart_boxes_of_visible_size_and_agree_in_number():
    facts = [obj("skis", APART[0]), obj("dog", APART[2]), obj("cat", (0.5, 0.1, 0.51, 0.11))]
    texts = {q.text for q in made("spatial_relation", facts)}
    assert "Where are the skis relative to the dog?" in texts
    assert not [t for t in asked(made("spatial_relation", facts)) if "cat" in t]


def coco_names() -> list[str]:
    config = yaml.safe_load(require_shared_data("coco128", "object_detection", "config.yaml").read_text())
    return list(config["names"].values())


SPECIAL = {"person": "people", "sheep": "sheep", "skis": "skis", "scissors": "scissors", "broccoli": "broccoli",
           "tv": "TVs", "mouse": "mice", "knife": "knives", "bus": "buses", "bench": "benches", "couch": "couches",
           "sandwich": "sandwiches", "toothbrush": "toothbrushes", "wine glass": "wine glasses",
           "hair drier": "hair driers", "hot dog": "hot dogs", "teddy bear": "teddy bears"}


def test_every_coco_class_name_has_its_english_plural_and_verb():
    names = coco_names()
    assert len(names) == 80 and SPECIAL.keys() <= set(names)
    vocabulary = load_vocabulary()
    said = {name: plural(name, vocabulary) for name in names}
    assert {name: said[name] for name in SPECIAL} == SPECIAL
    # every other one: the regular -s or -es of its last word
    regular = {name: p for name, p in said.items() if name not in SPECIAL
               and not re.fullmatch(re.escape(name) + "(s|es)", p)}
    assert not regular
    for name in names:
        q = asked(made("instance_location", [obj(name, (0.72, 0.05, 0.9, 0.25))]), "location")
        verb = "are" if name in ("skis", "scissors") else "is"
        spoken = "TV" if name == "tv" else name
        assert list(q) == [f"In which part of the image {verb} the {spoken}?"]


def test_how_many_shapes_never_offers_the_count_with_the_signs():
    shapes = ["circle", "square", "triangle", "star", "hexagon"]
    facts = [obj(s, (0.05 + 0.18 * i, 0.7, 0.15 + 0.18 * i, 0.8), colour="red") for i, s in enumerate(shapes)]
    facts += [ocr("TEA", (0.1, 0.1, 0.3, 0.2), "supplied", None), ocr("SALE", (0.6, 0.1, 0.8, 0.2), "supplied", None)]
    for seed in range(20):
        questions = generate(IMAGE, facts, registry().get("instances_counting"), load_vocabulary(),
                             ProgrammaticSettings(per_dimension=50), seed=seed)
        everything = [q for q in questions if q.text == "How many shapes are there in the image?"]
        assert everything and all(q.options[q.answer] == "5" for q in everything)
        assert not [q.options for q in everything if {"6", "7"} & set(q.options)]


def test_a_text_question_only_about_a_reading_that_holds_up_and_its_crop_is_recorded():
    facts = [ocr("mm mer mee m wm wow mn wom", (0.1, 0.1, 0.5, 0.2), score=0.8),  # debris on a grille
             ocr("OMNHTES", (0.1, 0.3, 0.4, 0.4), score=0.7),                      # a misread, alone
             ocr("PIACENZA", (0.5, 0.5, 0.8, 0.6), score=0.97),                    # a confident well-formed word
             ocr("Msgs", (0.1, 0.7, 0.2, 0.8), score=0.6), ocr("Msgs", (0.1, 0.7, 0.2, 0.8), "paddleocr", 0.7)]
    questions = made("text_understanding", facts)
    keys = {q.options[q.answer]: q for q in questions}
    assert set(keys) == {"PIACENZA", "Msgs"}
    assert keys["PIACENZA"].meta["crop"] == [0.5, 0.5, 0.8, 0.6]
    assert not {"OMNHTES", "mm mer mee m wm wow mn wom"} & {o for q in questions for o in q.options}


def test_text_distractors_never_come_from_reads_on_other_photos_that_do_not_hold_up():
    other = [ocr(text, (0.1, 0.1, 0.4, 0.2), score=0.6, item=f"other{i}")
             for i, text in enumerate(["IOVARA", "HACENZA", "CRZZ", "OMNHTES", "WOMN", "MERE", "WOWM", "MEEM"])]
    vocabulary = load_vocabulary().widened(other, ProgrammaticSettings())
    assert not set(vocabulary.words) & {f.text for f in other}
    questions = made("text_understanding", [ocr("PIACENZA", (0.5, 0.5, 0.8, 0.6), score=0.97)], vocabulary)
    assert questions and all(set(q.options[1:]) <= set(load_vocabulary().words) for q in questions)


def test_a_mixed_case_reading_gets_distractors_in_its_own_case():
    questions = made("text_understanding", [ocr("Piacenza", (0.5, 0.5, 0.8, 0.6), score=0.97)])
    words = {w.capitalize() for w in load_vocabulary().words}
    assert questions and all(set(q.options[1:]) <= words for q in questions)


RARE = ("giraffe", "kite", "toaster", "clock", "vase", "bench", "zebra", "oven", "sink", "donut")


def _photo_collection(n: int = 240) -> list[tuple[Image, list[Fact]]]:
    """A COCO-like collection: people in 70% of the photos, one to four of them, and where there are
    several, every other photo has two touching (a count the boxes cannot settle); one rarer thing each."""
    slots = [(0.05 + 0.23 * i, 0.4, 0.2 + 0.23 * i, 0.6) for i in range(4)]
    photos = []
    for i in range(n):
        image = Image(id=f"photo{i}", path=f"photo{i}.jpg", width=640, height=480)
        people = 1 + i % 4 if i % 10 < 7 else 0
        boxes = slots[:people]
        if people >= 2 and i % 20 < 10:
            boxes = [(0.05, 0.4, 0.2, 0.6), (0.19, 0.4, 0.34, 0.6), *slots[2:people]]
        facts = [Fact(item_id=image.id, kind="object", text=label, box=box, provenance=SUPPLIED)
                 for label, box in [*(("person", b) for b in boxes), (RARE[i % len(RARE)], (0.3, 0.1, 0.5, 0.3))]]
        photos.append((image, facts))
    return photos


def test_counts_on_a_photo_collection_do_not_give_their_key_to_a_model_without_the_image():
    photos = _photo_collection()
    vocabulary = load_vocabulary().widened([f for _image, facts in photos for f in facts], ProgrammaticSettings())
    questions = [q for image, facts in photos
                 for q in generate(image, facts, registry().get("instances_counting"), vocabulary,
                                   ProgrammaticSettings(per_dimension=50), seed=3)
                 if "dropped" not in q.meta and q.meta["template"] == "count"]
    assert len(questions) >= 60
    # the test's own truth: the key is the number of boxes of the label the question names
    names = {f"How many {plural(label, vocabulary)} are there in the image?": label for label in ("person", *RARE)}
    facts_of = {image.id: facts for image, facts in photos}
    for q in questions:
        assert q.options[q.answer] == str(sum(f.text == names[q.text] for f in facts_of[q.item_id]))
    # the key is not the smallest (or largest) number shown more often than a quarter of the time
    ranks = [sorted(int(o) for o in q.options).index(int(q.options[q.answer])) for q in questions]
    assert max(ranks.count(r) for r in range(4)) / len(ranks) < 0.36, ranks
    # each number is the key of about a quarter of the questions that show it, though the collection's keys
    # are mostly 0 and 1 (the label named still leans: a common label has more of the larger counts)
    shown, keyed = Counter(o for q in questions for o in q.options), Counter(q.options[q.answer] for q in questions)
    assert all(abs(keyed[v] / shown[v] - 0.25) < 0.12 for v in shown if shown[v] >= 40), (keyed, shown)


# -- questions whose options are labels: each option judged by the test's own reading of the boxes -----

def _label_of(option: str, labels) -> str:
    return next(label for label in labels if option in (label, plural(label, load_vocabulary())))


def test_which_label_is_to_one_side_offers_only_labels_clear_of_that_side():
    dog = (0.4, 0.4, 0.6, 0.6)
    facts = [obj("dog", dog), obj("person", (0.05, 0.42, 0.25, 0.62)), obj("cup", (0.7, 0.45, 0.85, 0.6)),
             obj("chair", (0.3, 0.15, 0.45, 0.35)), caption("A dog with a cat nearby")]  # the chair: up, a little left
    questions = [q for q in asked(made("spatial_relation", facts)).values()
                 if q.text.startswith("Which of these") and q.text.endswith("the dog?")]
    texts = {q.text for q in questions}
    assert {"Which of these is to the left of the dog?", "Which of these is to the right of the dog?"} <= texts
    boxes = {f.text: f.box for f in facts if f.kind == "object"}
    centre, middle = (dog[0] + dog[2]) / 2, (dog[1] + dog[3]) / 2
    for q in questions:
        side = q.text.removeprefix("Which of these is ").removesuffix(" the dog?")
        key = q.options[q.answer]
        assert (side, key) in {("to the left of", "person"), ("to the right of", "cup"), ("above", "chair")}
        for option in q.options:
            assert option != "cat"  # a caption names it: maybe in the photo
            if option != key and option in boxes:  # a present wrong option keeps clear of that side of the dog
                x1, y1, x2, y2 = boxes[option]
                clear = {"to the left of": x1 >= centre, "to the right of": x2 <= centre, "above": y1 >= middle,
                         "below": y2 <= middle}
                assert clear[side], (q.text, option)
        assert "chair" not in q.options or side != "to the left of"  # it reaches left of the dog's centre


def test_which_label_is_in_a_region_never_offers_one_that_reaches_into_it():
    facts = [obj("person", (0.05, 0.05, 0.25, 0.25)), obj("cup", (0.72, 0.75, 0.9, 0.95)),
             obj("bench", (0.0, 0.0, 1.0, 1.0))]
    questions = [q for q in asked(made("instance_location", facts)).values() if q.text.startswith("Which of these")]
    keys = {q.text: q.options[q.answer] for q in questions}
    assert keys == {"Which of these is in the top left of the image?": "person",
                    "Which of these is in the bottom right of the image?": "cup"}
    for q in questions:
        assert "bench" not in q.options  # it covers every region: neither the key nor surely elsewhere
        assert not {"person", "cup"} & set(q.options) - {q.options[q.answer]}  # the other is in another corner only


def test_which_label_there_are_exactly_n_of_is_settled_by_the_boxes():
    facts = [*(obj("person", box) for box in APART), obj("dog", (0.4, 0.1, 0.55, 0.3)),
             obj("car", (0.1, 0.75, 0.2, 0.85)), obj("car", (0.19, 0.75, 0.3, 0.85)),  # touching: unsettled
             caption("People and a dog near a cat")]
    questions = [q for q in asked(made("instances_counting", facts)).values() if q.text.startswith("Which of these")]
    counts = {label: sum(f.text == label for f in facts if f.kind == "object") for label in load_vocabulary().labels}
    numbers = {"one": 1, "two": 2, "three": 3}
    asked_n = set()
    for q in questions:
        n = numbers[re.fullmatch(r"Which of these (?:is|are) there exactly (\w+) of in the image\?", q.text)[1]]
        asked_n.add(n)
        labels = [_label_of(o, counts) for o in q.options]
        assert counts[labels[q.answer]] == n
        for i, label in enumerate(labels):
            if i != q.answer:
                # two touching cars: more than one for sure, but maybe three
                assert counts[label] != n and label != "cat" and (label != "car" or n == 1)
    assert asked_n == {1, 3}


def test_a_label_in_most_photos_is_not_a_likelier_key_than_the_labels_shown_with_it():
    """People are in 70% of the photos, each rarer thing in 10%: drawn evenly, 'person' would be the key of
    most identity questions that offer it. Drawn by their weights and kept by the keep chances, it is the
    key of about a quarter of them, like every other label."""
    photos = _photo_collection()
    vocabulary = load_vocabulary().widened([f for _image, facts in photos for f in facts], ProgrammaticSettings())
    questions = [q for image, facts in photos
                 for q in generate(image, facts, registry().get("instance_identity"), vocabulary,
                                   ProgrammaticSettings(per_dimension=50), seed=3) if "dropped" not in q.meta]
    facts_of = {image.id: {f.text for f in facts} for image, facts in photos}
    for q in questions:  # the test's own truth: the key alone is in the photo
        assert [o in facts_of[q.item_id] for o in q.options] == [i == q.answer for i in range(4)]
    shown, keyed = Counter(o for q in questions for o in q.options), Counter(q.options[q.answer] for q in questions)
    assert shown["person"] >= 60 and abs(keyed["person"] / shown["person"] - 0.25) < 0.08, (keyed, shown)
    rare = [v for v in shown if v != "person" and shown[v] >= 20]
    assert rare and all(abs(keyed[v] / shown[v] - 0.25) < 0.15 for v in rare), (keyed, shown)


def test_the_keys_of_a_collection_are_tallied_at_each_photos_own_size():
    """A kite a fiftieth of the frame across covers 80x60 pixels on a 4000x3000 photo, where it is asked about,
    and under 13x10 at 640x480, where it is not: the keys the collection is balanced over follow the photos'
    own sizes, as the questions do."""
    photos = _photo_collection(60)
    for i in range(12):
        image = Image(id=f"large{i}", path=f"large{i}.jpg", width=4000, height=3000)
        photos.append((image, [Fact(item_id=image.id, kind="object", text="surfboard", box=(0.5, 0.5, 0.52, 0.52),
                                    provenance=SUPPLIED)]))
    facts = [f for _image, fs in photos for f in fs]
    sizes = {image.id: (image.width, image.height) for image, _facts in photos}
    vocabulary = load_vocabulary().widened(facts, ProgrammaticSettings(), sizes)
    assert vocabulary.keys["identity"]["surfboard"] == 12
    assert "surfboard" not in load_vocabulary().widened(facts, ProgrammaticSettings()).keys["identity"]
    asked_about = [q for image, fs in photos if image.width == 4000
                   for q in generate(image, fs, registry().get("instance_identity"), vocabulary,
                                     ProgrammaticSettings(), seed=3) if "dropped" not in q.meta]
    assert asked_about and all(q.options[q.answer] == "surfboard" for q in asked_about)
