"""What annotators see and what comes back: the labeling config, a question as a task, an annotation
as a Review.

One config serves images and videos: the `images` field of a task holds one image, or a video's
sampled frames, which Label Studio pages through. A question about text read off a photo (its meta holds
the `crop` the text was read from) shows that part of the photo, enlarged, under the image (`crop_view`),
so the annotator checks the reading where it was made. Questions about an image set have a config of their own
(`sets`): its `gallery` shows the set's images side by side, each under its number as the question names
it, through a HyperText tag, since Label Studio's Image tag shows only one image of a list at a time.

Label Studio 1.23 fills `$name` in a choice's `value` from the task's data ("SALE $5" shows and is
stored as "SALE undefined"), but never in its `html`. So each option's `value` is only its letter, and
each dimension's only its key, and the text the annotator reads goes in `html`, escaped: shown exactly
as written, markup included.

Label Studio gives every choice without a hotkey the next free one of 5-9, 0, q, w, e, ..., keys that
mean nothing beside a dimension or a discard reason. So every choice has its own: 1-4 the options, k
keep, x discard, a letter of each dimension's name (alt and a letter once the letters run out), shift and
a letter of each reason's.
"""

from __future__ import annotations

import html
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from urllib.parse import quote
from xml.sax.saxutils import quoteattr

from annotation.settings import ReviewSettings
from benchsmith.dimensions import Registry
from benchsmith.records import EPOCH, LETTERS, Item, Question, Review, pictures

KEEP, DISCARD = "Keep", "Discard"
OPTION_HOTKEYS = "1234"
# the options' and keep/discard's keys, and u and h, which Label Studio binds itself (unselect, pan)
RESERVED_KEYS = frozenset(OPTION_HOTKEYS + "kxuh")


def label_config(settings: ReviewSettings, second_look: bool = False, sets: bool = False) -> str:
    """The Label Studio XML for reviewing a question. The options and the dimensions are per task (see
    `to_task`), so each dimension comes preselected without a prediction, which costs the server more
    to import than the task itself. A second look also shows the task's note: why the question is back.
    With `sets`, the task's images are shown side by side, numbered (see `gallery`)."""
    other = quoteattr(settings.discard_reasons.get("other", ""))
    comment = (f"""
      <View visibleWhen="choice-selected" whenTagName="reasons" whenChoiceValue={other}>
        <TextArea name="comment" toName="image" placeholder="What is wrong?" rows="2" maxSubmissions="1"/>
      </View>""" if "other" in settings.discard_reasons else "")
    note = ("""
  <View style="background: #fff4e5; padding: 0.5em 1em; margin-bottom: 1em">
    <Header value="Back for a second look: the published answer is in doubt" size="5"/>
    <Text name="note" value="$note"/>
  </View>""" if second_look else "")
    return f"""<View>{note}
  {'<HyperText name="image" value="$gallery" inline="true"/>' if sets else
     '<Image name="image" valueList="$images" maxWidth="100%"/>' + CROP_VIEW}
  <Header value="$question"/>
  <Choices name="answer" toName="image" choice="single-radio" value="$options" showInline="false"/>
  <View style="margin-top: 1em">
    <Header value="Evaluation dimension" size="5"/>
    <Choices name="dimension" toName="image" choice="single-radio" showInline="true" value="$dimensions"/>
  </View>
{keep_or_discard("question", settings.discard_reasons, comment)}
</View>
"""


def keep_or_discard(subject: str, reasons: Mapping[str, str], comment: str) -> str:
    """The labeling block where an annotator keeps the `subject` or discards it with reasons (and the
    `comment` markup that goes with them)."""
    choices = "\n".join(f"        <Choice value={quoteattr(label)} hotkey={quoteattr(key)}/>"
                        for label, key in zip(reasons.values(), name_hotkeys(reasons.values(), "shift+")))
    return f"""  <View style="margin-top: 1em">
    <Header value="Keep this {subject}?" size="5"/>
    <Choices name="keep" toName="image" choice="single-radio" showInline="true" required="true">
      <Choice value="{KEEP}" hotkey="k"/>
      <Choice value="{DISCARD}" hotkey="x"/>
    </Choices>
    <View visibleWhen="choice-selected" whenTagName="keep" whenChoiceValue="{DISCARD}">
      <Header value="Why discard it?" size="6"/>
      <Choices name="reasons" toName="image" choice="multiple" showInline="true" required="true">
{choices}
      </Choices>{comment}
    </View>
  </View>"""


def name_hotkeys(names: Iterable[str], modifier: str = "") -> list[str]:
    """A key for each name that recalls it: the first letter of one of its words, else another of its
    letters, else any letter, else alt and a letter in the same order (26 image dimensions outnumber the
    free letters); never a reserved one or one an earlier name has ("" when none is left)."""
    used, keys = set(RESERVED_KEYS), []
    for name in names:
        words = re.findall(r"[a-z]+", name.lower())
        letters = [w[0] for w in words] + list("".join(words)) + list(string.ascii_lowercase)
        key = next((c for c in [*letters, *("alt+" + c for c in letters)] if c not in used), "")
        used.add(key)
        keys.append(modifier + key if key else "")
    return keys


def image_urls(item: Item, base: str) -> list[str]:
    """Where the annotator's browser finds the item's pictures: `base` is Label Studio's local file
    serving of the media folder, or the bucket URL that holds it."""
    return [base + quote(p) for p in pictures(item)]


def side_by_side(question: Question, registry: Registry) -> bool:
    """Whether a question asks about several images at once (its dimension's modality is an image set),
    so that its review shows them side by side rather than one at a time."""
    return registry.get(question.final_dimension_id).modality == "image_set"


def gallery(urls: Sequence[str]) -> str:
    """HTML that shows a set's images in a row that wraps, in order, each under its number as the
    question names it: "Image 1", "Image 2", ..."""
    width = 48 if len(urls) < 3 else 31  # two or three to a row
    return '<div style="display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start">' + "".join(
        f'<figure style="margin: 0; max-width: {width}%"><figcaption style="font-weight: bold">Image {n}</figcaption>'
        f'<img src={quoteattr(url)} alt="Image {n}" style="max-width: 100%"/></figure>'
        for n, url in enumerate(urls, 1)) + "</div>"


# Label Studio renders an empty value as nothing: a task without a crop shows no trace of it
CROP_VIEW = '\n  <HyperText name="crop" value="$crop" inline="true"/>'
CROP_MARGIN = 0.25  # of the crop's own width and height, each side: the reading's surroundings
CROP_WIDTH_PX = 480  # the most the enlarged crop takes on the page


def crop_view(url: str, box: Sequence[float], size: tuple[int, int]) -> str:
    """HTML that shows the part `box` (left, top, right, bottom, in fractions of the image) of the image at
    `url`, `size` pixels wide and high, with a margin around it, scaled to the page's width: a frame of the crop's proportions that
    clips the whole image, moved and scaled so only the crop shows (no file is written)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    mx, my = (x2 - x1) * CROP_MARGIN, (y2 - y1) * CROP_MARGIN
    x1, y1, x2, y2 = max(0.0, x1 - mx), max(0.0, y1 - my), min(1.0, x2 + mx), min(1.0, y2 + my)
    if x2 <= x1 or y2 <= y1:
        return ""
    width, height = x2 - x1, y2 - y1
    # the frame has the crop's proportions in pixels; the image in it is 1/width frames wide, so 1/height
    # frames high, shifted by the crop's corner
    return (f'<figure style="margin: 0.5em 0; max-width: {CROP_WIDTH_PX}px">'
            f'<figcaption style="font-weight: bold">The text was read here</figcaption>'
            f'<div data-crop="{x1:.4f},{y1:.4f},{x2:.4f},{y2:.4f}" style="position: relative; overflow: hidden; '
            f'width: 100%; aspect-ratio: {width * size[0]:.1f} / {height * size[1]:.1f}"><img src={quoteattr(url)} alt="where the text was read" '
            f'style="position: absolute; max-width: none; width: {100 / width:.3f}%; '
            f'left: {-100 * x1 / width:.3f}%; top: {-100 * y1 / height:.3f}%"/></div></figure>')


def option_label(index: int, text: str) -> str:
    return f"{LETTERS[index]}. {text}"


def shown(value: str, text: str, **rest) -> dict:
    """A choice that Label Studio stores as `value` and shows as `text`, exactly."""
    return {"value": value, "html": html.escape(text), **rest}


def to_task(question: Question, item: Item, registry: Registry, settings: ReviewSettings,
            base: str, *, round: str = "", note: str = "") -> dict:
    """One Label Studio task. The dimensions of the question's modality are listed from the registry
    with the current one (the generator's, or the reviewed one) preselected. The current answer goes in
    as a prediction, and only when `show_predictions` is set. A second look (`round`, the release
    version in doubt) carries its `note`."""
    generated = registry.get(question.final_dimension_id)
    dimensions = registry.for_modality(generated.modality)
    answer = question.final_answer
    urls = image_urls(item, base)
    task = {"data": {
        "question_id": question.id,
        "item_id": question.item_id,
        "images": urls,
        "question": question.text,
        "options": [shown(LETTERS[i], option_label(i, text), hotkey=OPTION_HOTKEYS[i])
                    for i, text in enumerate(question.options)],
        "dimensions": [shown(d.key, d.name, hint=d.definition, selected=d.id == generated.id, hotkey=key)
                       for d, key in zip(dimensions, name_hotkeys(d.name for d in dimensions))],
    }}
    if side_by_side(question, registry):
        task["data"]["gallery"] = gallery(urls)
    else:
        crop = question.meta.get("crop")
        task["data"]["crop"] = (crop_view(urls[0], crop, (item.width, item.height))
                                if crop and urls and item.width and item.height else "")
    if round:
        task["data"] |= {"round": round, "note": note}
    if settings.show_predictions:
        task["predictions"] = [{"model_version": question.provenance.backend, "result": [
            {"from_name": "answer", "to_name": "image", "type": "choices", "value": {"choices": [LETTERS[answer]]}}]}]
    return task


def to_review(task: dict, annotation: dict, registry: Registry, settings: ReviewSettings) -> Review:
    """An exported annotation as a Review; choices map back to an option index, a dimension id and
    reason keys. A choice this config does not know is an error, not a silent None."""
    picked, texts = results(annotation)
    options = {o["value"]: i for i, o in enumerate(task["data"]["options"])}
    # tasks pushed before options were letters store "A. text"; where Label Studio filled in a `$name`
    # it stored the altered text ("A. SALE undefined"), and only option A starts with "A. "
    altered = {option_label(i, ""): i for i, o in enumerate(task["data"]["options"]) if "$" in o["value"]}
    dimensions = {d.name: d.id for d in registry} | {d.key: d.id for d in registry}
    reason_keys = {label: key for key, label in settings.discard_reasons.items()}

    def known(what: str, value: str, choices: dict, by_prefix: Mapping[str, int] | None = None):
        found = choices.get(value, (by_prefix or {}).get(value[:3]))
        if found is None:
            raise ValueError(f"task {task['id']}, annotation {annotation['id']}: unknown {what} {value!r}")
        return found

    answer = known("option", picked["answer"][0], options, altered) if picked.get("answer") else None
    dimension_id = known("dimension", picked["dimension"][0], dimensions) if picked.get("dimension") else None
    keep = picked.get("keep", [KEEP])[0] == KEEP
    return Review(
        question_id=task["data"]["question_id"], task_id=task["id"], annotation_id=annotation["id"],
        annotator=annotator_of(annotation), answer=answer, dimension_id=dimension_id, keep=keep,
        reasons=[] if keep else [known("discard reason", label, reason_keys) for label in picked.get("reasons", [])],
        comment="" if keep else " ".join(texts.get("comment", [])).strip(), submitted_at=saved_at(annotation),
    )


def results(annotation: dict) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """What an annotation holds, by the name of its control: the choices picked, and the lines of text."""
    picked: dict[str, list[str]] = {}
    texts: dict[str, list[str]] = {}
    for result in annotation.get("result", []):
        value = result.get("value", {})
        if "choices" in value:
            picked[result["from_name"]] = value["choices"]
        elif "text" in value:
            texts[result["from_name"]] = value["text"]
    return picked, texts


def annotator_of(annotation: dict) -> str:
    """Who submitted an annotation: their email, else their user id."""
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        return who.get("email") or str(who.get("id"))
    return str(who)


def saved_at(annotation: dict) -> datetime:
    """When Label Studio last saved an annotation (its first save when it was never updated)."""
    when = annotation.get("updated_at") or annotation.get("created_at")
    return datetime.fromisoformat(when.replace("Z", "+00:00")) if when else EPOCH
