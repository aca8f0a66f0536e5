"""The labeling config, a question as a task, and an exported annotation as a Review."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from annotation.labeling import CROP_VIEW, label_config, to_review, to_task
from annotation.settings import ReviewSettings
from benchsmith.dimensions import registry
from benchsmith.records import Image, ImageSet, Provenance, Question, Video

BASE = "/data/local-files/?d=media/"


def question(dimension_id: int = 5, item_id: str = "img1") -> Question:
    return Question(item_id=item_id, dimension_id=dimension_id, text="How many red circles are there?",
                    options=["1", "2", "3", "4"], answer=2, provenance=Provenance(backend="template"))


def test_the_config_has_the_image_question_options_dimension_and_conditional_discard_reasons():
    root = ET.fromstring(label_config(ReviewSettings()))
    controls = {el.get("name"): el for el in root.iter() if el.tag in ("Choices", "TextArea", "Image")}
    assert controls["image"].get("valueList") == "$images"
    assert controls["answer"].get("value") == "$options" and controls["answer"].get("choice") == "single-radio"
    assert controls["dimension"].get("value") == "$dimensions" and controls["dimension"].get("choice") == "single-radio"
    assert [c.get("value") for c in controls["keep"]] == ["Keep", "Discard"]
    assert any(h.get("value") == "$question" for h in root.iter("Header"))

    shown_on_discard = next(v for v in root.iter("View") if v.get("whenTagName") == "keep")
    assert shown_on_discard.get("whenChoiceValue") == "Discard"
    reasons = shown_on_discard.find("Choices")
    assert [c.get("value") for c in reasons] == list(ReviewSettings().discard_reasons.values())
    comment_view = next(v for v in shown_on_discard.iter("View") if v.get("whenTagName") == "reasons")
    assert comment_view.get("whenChoiceValue") == "Other" and comment_view.find("TextArea") is not None


def test_discard_reasons_come_from_settings():
    review = ReviewSettings(discard_reasons={"offensive": "Offensive <content>", "ambiguous": "Ambiguous"})
    root = ET.fromstring(label_config(review))
    reasons = next(c for c in root.iter("Choices") if c.get("name") == "reasons")
    assert [c.get("value") for c in reasons] == ["Offensive <content>", "Ambiguous"]
    assert not any(el.get("name") == "comment" for el in root.iter("TextArea"))


def test_a_task_carries_options_with_hotkeys_and_the_generators_dimension_preselected():
    item = Image(id="img1", path="ab/cd ef.png", width=10, height=10)
    task = to_task(question(5), item, registry(), ReviewSettings(), BASE)
    data = task["data"]
    assert data["images"] == [BASE + "ab/cd%20ef.png"]
    assert data["options"] == [{"value": "A", "html": "A. 1", "hotkey": "1"}, {"value": "B", "html": "B. 2", "hotkey": "2"},
                               {"value": "C", "html": "C. 3", "hotkey": "3"}, {"value": "D", "html": "D. 4", "hotkey": "4"}]
    assert [(d["value"], d["html"]) for d in data["dimensions"] if d["selected"]] == [
        ("instances_counting", "Instances Counting")]
    assert [d["html"] for d in data["dimensions"]] == [d.name for d in registry().for_modality("image")]
    assert "predictions" not in task  # the generator's answer stays hidden

    shown = to_task(question(5), item, registry(), ReviewSettings(show_predictions=True), BASE)
    assert shown["predictions"][0]["result"][0]["value"] == {"choices": ["C"]}


def test_label_studio_stores_only_letters_and_keys_and_shows_the_text_escaped():
    # Label Studio fills `$name` in a choice's value from the task, and renders its html as markup
    tricky = question(9).model_copy(update={"options": ["SALE $5", "$question", "<b>x</b> & {{y}}", "4"]})
    data = to_task(tricky, Image(id="img1", path="p.png", width=1, height=1), registry(), ReviewSettings(), BASE)["data"]
    assert [(o["value"], o["html"]) for o in data["options"]] == [
        ("A", "A. SALE $5"), ("B", "B. $question"), ("C", "C. &lt;b&gt;x&lt;/b&gt; &amp; {{y}}"), ("D", "D. 4")]
    assert all(d["value"].isidentifier() for d in data["dimensions"])


def test_every_choice_has_its_own_key_and_a_dimensions_recalls_its_name():
    """Label Studio would give a choice without a key the next free one of 5-9, 0, q, w, e: noise."""
    root = ET.fromstring(label_config(ReviewSettings()))
    fixed = [c.get("hotkey") for name in ("keep", "reasons") for c in next(
        el for el in root.iter("Choices") if el.get("name") == name)]
    assert fixed == ["k", "x", "shift+a", "shift+n", "shift+s", "shift+w", "shift+d", "shift+b", "shift+o"]
    item = Image(id="img1", path="p.png", width=1, height=1)
    for dimension_id in (5, 10):  # an image and a video question
        data = to_task(question(dimension_id), item, registry(), ReviewSettings(), BASE)["data"]
        keys = [o["hotkey"] for o in data["options"]] + [d["hotkey"] for d in data["dimensions"]] + fixed
        assert all(keys) and len(set(keys)) == len(keys)
    image = to_task(question(5), item, registry(), ReviewSettings(), BASE)["data"]["dimensions"]
    assert {d["html"]: d["hotkey"] for d in image} == {
        "Scene Understanding": "s", "Instance Identity": "i", "Instance Attributes": "a", "Instance Location": "l",
        "Instances Counting": "c", "Spatial Relation": "r", "Instance Interaction": "n", "Visual Reasoning": "v",
        "Text Understanding": "t", "Visual Question Answering": "q", "Image-Text Matching": "m",
        "Visual Grounding": "g", "Chart Value Retrieval": "e", "Chart Comparison": "o", "Chart Arithmetic": "b",
        "Chart Text Reading": "d", "Chart Layout": "y", "Map Reading": "p", "Map Routes": "f",
        "Map Spatial Relations": "j", "Web Page Reading": "w", "Web Page Comparison": "z", "Web Page Layout": "alt+w"}


def test_a_video_question_shows_the_sampled_frames_and_video_dimensions():
    video = Video(id="vid1", path="v.mp4", frames=["v/0.jpg", "v/1.jpg", "v/2.jpg"])
    data = to_task(question(10, "vid1"), video, registry(), ReviewSettings(), BASE)["data"]
    assert data["images"] == [BASE + "v/0.jpg", BASE + "v/1.jpg", BASE + "v/2.jpg"]
    assert [d["html"] for d in data["dimensions"]] == [d.name for d in registry().for_modality("video")]


def test_an_image_set_question_shows_every_image_side_by_side_numbered_as_the_question_numbers_them():
    members = [Image(id=f"img{n}", path=f"s/{n} b.png", width=8, height=8) for n in (1, 2, 3)]
    image_set = ImageSet.of(members)
    data = to_task(question(28, image_set.id), image_set, registry(), ReviewSettings(), BASE)["data"]
    assert data["images"] == [BASE + f"s/{n}%20b.png" for n in (1, 2, 3)]
    figures = ET.fromstring(data["gallery"]).findall("figure")
    assert [(f.find("figcaption").text, f.find("img").get("src")) for f in figures] == [
        (f"Image {n}", BASE + f"s/{n}%20b.png") for n in (1, 2, 3)]
    assert [(d["html"], d["hotkey"], d["selected"]) for d in data["dimensions"]] == [
        ("Image Differences", "i", False), ("Image Comparison", "c", True), ("Visual Correspondence", "v", False)]
    assert "gallery" not in to_task(question(5), members[0], registry(), ReviewSettings(), BASE)["data"]

    # the set's config shows the gallery where the single-image one pages through `images`; the rest is the same
    gallery = '<HyperText name="image" value="$gallery" inline="true"/>'
    single, sets = label_config(ReviewSettings()), label_config(ReviewSettings(), sets=True)
    assert sets == single.replace('<Image name="image" valueList="$images" maxWidth="100%"/>' + CROP_VIEW, gallery)


def test_a_question_about_text_read_off_a_photo_shows_where_it_was_read_enlarged_under_the_image():
    photo = Image(id="img1", path="p 1.jpg", width=640, height=480)
    read = question(9).model_copy(update={"meta": {"template": "text", "crop": [0.5, 0.25, 0.75, 0.375]}})
    assert ET.fromstring(label_config(ReviewSettings())).find("HyperText").get("value") == "$crop"

    figure = ET.fromstring(to_task(read, photo, registry(), ReviewSettings(), BASE)["data"]["crop"])
    frame, image = figure.find("div"), figure.find("div/img")
    assert figure.find("figcaption").text == "The text was read here"
    assert image.get("src") == BASE + "p%201.jpg"
    # a quarter of the crop's size added each side: x 0.4375-0.8125, y 0.21875-0.40625 of the photo
    assert frame.get("data-crop") == "0.4375,0.2188,0.8125,0.4062"
    style = dict(part.split(": ") for part in image.get("style").split("; "))
    width, left, top = (float(style[k].rstrip("%")) for k in ("width", "left", "top"))
    assert (round(width, 1), round(left, 1), round(top, 1)) == (266.7, -116.7, -116.7)  # 1/0.375, 0.4375/0.375, ...
    assert "aspect-ratio: 240.0 / 90.0" in frame.get("style")  # the crop's own proportions, in pixels

    # at the border the margin stops at the photo's edge; a question without a crop shows none
    edge = read.model_copy(update={"meta": {"crop": [0.0, 0.9, 0.2, 1.0]}})
    frame = ET.fromstring(to_task(edge, photo, registry(), ReviewSettings(), BASE)["data"]["crop"]).find("div")
    assert frame.get("data-crop") == "0.0000,0.8750,0.2500,1.0000"
    assert to_task(question(9), photo, registry(), ReviewSettings(), BASE)["data"]["crop"] == ""


def annotation(*results, annotation_id=7, who=3):
    return {"id": annotation_id, "completed_by": {"id": who, "email": "a@x"}, "result": [
        {"from_name": name, "to_name": "image", "type": kind, "value": value} for name, kind, value in results]}


def test_an_annotation_maps_back_to_option_index_dimension_and_reason_keys():
    task = {"id": 11, **to_task(question(5), Image(id="img1", path="p.png", width=1, height=1), registry(),
                                ReviewSettings(), BASE)}
    kept = to_review(task, annotation(("answer", "choices", {"choices": ["B"]}),
                                      ("dimension", "choices", {"choices": ["spatial_relation"]}),
                                      ("keep", "choices", {"choices": ["Keep"]})), registry(), ReviewSettings())
    assert (kept.question_id, kept.task_id, kept.annotation_id, kept.annotator) == (question(5).id, 11, 7, "a@x")
    assert (kept.keep, kept.answer, kept.dimension_id, kept.reasons) == (True, 1, 6, [])

    dropped = to_review(task, annotation(("keep", "choices", {"choices": ["Discard"]}),
                                         ("reasons", "choices", {"choices": ["Ambiguous", "Other"]}),
                                         ("comment", "textarea", {"text": ["two circles overlap"]})),
                        registry(), ReviewSettings())
    assert (dropped.keep, dropped.answer, dropped.reasons, dropped.comment) == (
        False, None, ["ambiguous", "other"], "two circles overlap")


def test_an_annotation_from_a_task_pushed_when_options_were_their_text_still_maps_back():
    old = {"id": 12, "data": {"question_id": "q1", "options": [
        {"value": "A. FROM $5"}, {"value": "B. two"}, {"value": "C. $question"}, {"value": "D. four"}]}}

    def picked(option: str, dimension: str = "Instances Counting"):
        return to_review(old, annotation(("answer", "choices", {"choices": [option]}),
                                         ("dimension", "choices", {"choices": [dimension]})), registry(), ReviewSettings())

    assert (picked("B. two").answer, picked("B. two").dimension_id) == (1, 5)
    # Label Studio 1.23 stored these options with their `$name` filled in: the letter still says which
    assert picked("A. FROM undefined").answer == 0 and picked("C. How many red circles are there?").answer == 2
    with pytest.raises(ValueError, match="unknown option 'B. three'"):
        picked("B. three")  # option B had no `$`: nothing filled in, so another text is not B


def test_an_annotation_with_a_choice_the_config_does_not_know_is_an_error():
    task = {"id": 11, **to_task(question(5), Image(id="img1", path="p.png", width=1, height=1), registry(),
                                ReviewSettings(), BASE)}
    with pytest.raises(ValueError, match="task 11, annotation 7: unknown option 'E'"):
        to_review(task, annotation(("answer", "choices", {"choices": ["E"]})), registry(), ReviewSettings())
    with pytest.raises(ValueError, match="unknown option 'A. 1'"):  # the old form is read only from old tasks
        to_review(task, annotation(("answer", "choices", {"choices": ["A. 1"]})), registry(), ReviewSettings())
