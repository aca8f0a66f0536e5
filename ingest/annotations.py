"""Supplied annotations (captions, tags, objects, OCR lines, exact truth, task rows): the manifest format,
checked and normalised to unit coordinates at ingest (`normalise_annotations`)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from benchsmith.geometry import OutsideImage, unit_box
from benchsmith.settings import Strict


MAX_LABEL_CHARS = 200
MAX_CAPTION_CHARS = 2000
_MARKUP = re.compile(r"<\s*[A-Za-z/!][^>]*>")


def _checked_text(value: str, what: str, limit: int) -> str:
    """Every supplied text that can become question text (labels, attributes, tags, captions, OCR lines,
    a task row's answers) ends up in prompts, in the review UI and in the published dataset: refuse
    what cannot be meant."""
    value = value.strip()
    if not value:
        raise ValueError(f"{what} is empty")
    if len(value) > limit:
        raise ValueError(f"{what} is {len(value)} characters; at most {limit}")
    return _unmarked(value, what)


def has_markup(text: str) -> bool:
    return bool(_MARKUP.search(text))


def _unmarked(value: str, what: str) -> str:
    if has_markup(value):
        raise ValueError(f"{what} contains markup (HTML tags)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid UTF-8 text") from None
    return value


def _unmarked_fields(value: Any, where: str) -> None:
    """A task row's columns are kept as they are, any of them may be read as a question, an answer or a
    label (data/reform_tasks.yaml), and an empty one may mean no answer: refuse only markup in them."""
    if isinstance(value, str):
        _unmarked(value, where)
    elif isinstance(value, dict):
        for key, inner in value.items():
            _unmarked_fields(inner, f"{where}.{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            _unmarked_fields(inner, f"{where}[{index}]")


Label = Annotated[str, AfterValidator(lambda value: _checked_text(value, "label", MAX_LABEL_CHARS))]
OcrText = Annotated[str, AfterValidator(lambda value: _checked_text(value, "ocr text", MAX_CAPTION_CHARS))]


class SuppliedObject(Strict):
    """An object: `label` plus one of `box` (normalised xyxy), `box_px` (pixel xyxy) or `bbox` (COCO
    pixel xywh); optional `attributes` such as {"colour": "red"} and `score`. `crowd` marks a region that
    holds many instances of its class (COCO's `iscrowd`): truth that the class is there, never one
    countable object."""

    label: Label
    box: tuple[float, float, float, float] | None = None
    box_px: tuple[float, float, float, float] | None = None
    bbox: tuple[float, float, float, float] | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    score: float | None = None
    crowd: bool = False

    @field_validator("attributes")
    @classmethod
    def _attributes(cls, values: dict[str, str]) -> dict[str, str]:
        return {_checked_text(key, "attribute name", MAX_LABEL_CHARS):
                _checked_text(value, f"attribute {key!r}", MAX_LABEL_CHARS) for key, value in values.items()}

    @model_validator(mode="after")
    def _one_box(self) -> SuppliedObject:
        if sum(b is not None for b in (self.box, self.box_px, self.bbox)) != 1:
            raise ValueError("give exactly one of box, box_px, bbox")
        return self


class SuppliedText(Strict):
    """A text line: `text` plus `box` (normalised xyxy), `box_px`, or `quad` (4 normalised points)."""

    text: OcrText
    box: tuple[float, float, float, float] | None = None
    box_px: tuple[float, float, float, float] | None = None
    quad: tuple[tuple[float, float], tuple[float, float], tuple[float, float], tuple[float, float]] | None = None
    score: float | None = None


class Dropped(Strict):
    """A supplied object or text line that is not kept, and why: `rule` names the kind of reason
    (`no_area`, `no_box`, `bad_box`, `unknown_class`, `bad_line`, `unreadable`) so the ingest summary can
    count them."""

    kind: Literal["object", "ocr"]
    rule: str
    reason: str
    label: str | None = None
    text: str | None = None


class SuppliedAnnotations(Strict):
    captions: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    objects: list[SuppliedObject] = Field(default_factory=list)
    ocr: list[SuppliedText] = Field(default_factory=list)
    truth: dict[str, Any] = Field(default_factory=dict)  # exact ground truth (oracle scenes), kept as is
    reform: list[dict[str, Any]] = Field(default_factory=list)  # task rows for the reform generator, kept as is
    dropped: list[Dropped] = Field(default_factory=list)  # what the source itself could not use (COCO, YOLO)

    @field_validator("captions")
    @classmethod
    def _captions(cls, values: list[str]) -> list[str]:
        return [_checked_text(v, "caption", MAX_CAPTION_CHARS) for v in values]

    @field_validator("tags")
    @classmethod
    def _tags(cls, values: list[str]) -> list[str]:
        return [_checked_text(v, "tag", MAX_LABEL_CHARS) for v in values]

    @field_validator("reform")
    @classmethod
    def _reform(cls, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for record in records:
            for column, value in record.get("fields", {}).items():
                _unmarked_fields(value, f"{record.get('task')} column {column}")
        return records


def normalise_annotations(raw: dict[str, Any], width: int, height: int) -> dict[str, Any]:
    """Validate supplied annotations and express every box in unit coordinates. Raises ValueError.

    Objects and text lines whose box lies wholly outside the image are not kept: each goes to
    `dropped` with its reason (after what the source dropped itself), so no question is ever asked about
    something the image does not show."""
    if isinstance(raw.get("captions"), str):
        raw = raw | {"captions": [raw["captions"]]}
    try:
        parsed = SuppliedAnnotations.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    objects, dropped = [], [d.model_dump(exclude_none=True) for d in parsed.dropped]
    for o in parsed.objects:
        try:
            box = unit_box(width, height, box=o.box, box_px=o.box_px, bbox=o.bbox, ndigits=6)
        except OutsideImage as exc:
            dropped.append({"kind": "object", "rule": "no_area", "label": o.label, "reason": str(exc)})
            continue
        objects.append({"label": o.label, "box": list(box), "attributes": o.attributes}
                       | ({"score": o.score} if o.score is not None else {}) | ({"crowd": True} if o.crowd else {}))
    ocr = []
    for line in parsed.ocr:
        if line.quad is not None:
            quad = [list(p) for p in line.quad]
        else:
            try:
                box = unit_box(width, height, box=line.box, box_px=line.box_px, ndigits=6)
            except OutsideImage as exc:
                dropped.append({"kind": "ocr", "rule": "no_area", "text": line.text, "reason": str(exc)})
                continue
            if box is None:
                raise ValueError(f"ocr line {line.text!r} needs box, box_px or quad")
            x1, y1, x2, y2 = box
            quad = [[x1, y1], [x2, y1], [x2, y2], [x1, y2]]
        ocr.append({"text": line.text, "quad": quad} | ({"score": line.score} if line.score is not None else {}))
    return {key: value for key, value in (("captions", parsed.captions), ("tags", parsed.tags), ("objects", objects),
                                          ("ocr", ocr), ("truth", parsed.truth), ("reform", parsed.reform),
                                          ("dropped", dropped)) if value}
