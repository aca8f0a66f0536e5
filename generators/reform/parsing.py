"""An annotation record, as ingest kept it, read into what its method needs (`Parsed`), or the reason it
cannot become a question (`Unusable`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchsmith.dimensions import Dimension
from benchsmith.geometry import Box, unit_box
from benchsmith.records import Image, normalise_text
from generators.reform.answers import answer_key
from generators.reform.settings import ReformSettings
from ingest.tasks import TaskKind, records_of


class Unusable(ValueError):
    """An annotation that cannot become a question; the message is its recorded reason."""


def field_value(record: dict, kind: TaskKind, name: str, *, required: bool = True) -> Any:
    fields = record.get("fields") or {}
    for alias in kind.fields.get(name, ()):
        value = fields.get(alias)
        if value not in (None, "", [], {}):
            return value
    if required:
        raise Unusable(f"no {name} for a {kind.key} annotation: none of the columns "
                       f"{', '.join(kind.fields.get(name, ()))} (columns: {', '.join(sorted(fields)) or 'none'})")
    return None


def _strings(value: Any, keys: Sequence[str]) -> list[str]:
    """A string, or a list of strings or of dicts holding one under one of `keys`, as clean strings."""
    out = []
    for v in value if isinstance(value, list) else (value,):
        if isinstance(v, dict):
            for k in keys:
                if v.get(k) not in (None, ""):
                    v = v[k]
                    break
            else:
                continue
        if isinstance(v, (str, int, float)) and not isinstance(v, bool) and (text := " ".join(str(v).split())):
            out.append(text)
    return out


def annotation_id(record: dict, kind: TaskKind) -> str:
    value = field_value(record, kind, "id", required=False)
    return str(value) if value is not None else str(record.get("row") or "")


@dataclass(frozen=True)
class Parsed:
    """One annotation reduced to what its method needs."""

    kind: TaskKind
    dataset: str
    annotation: str
    key: str                                    # the correct option
    accepted: tuple[str, ...]                   # everything that must never be a distractor
    group: str = ""                             # the pool it draws distractors from (VQA: the question type)
    question: str = ""
    extra: dict = field(default_factory=dict)


def question_type(question: str, record: dict, kind: TaskKind) -> str:
    given = field_value(record, kind, "question_type", required=False)
    if isinstance(given, dict):  # GQA's types: {structural, semantic, detailed}
        given = given.get("detailed") or given.get("semantic")
    if isinstance(given, str) and given.strip():
        return given.strip().casefold()
    return " ".join(normalise_text(question).split()[:2])  # VQAv2's types are the question's opening words


def parse_vqa(record: dict, kind: TaskKind, dataset: str) -> list[Parsed]:
    question = _strings(field_value(record, kind, "question"), ("question",))
    answers = _strings(field_value(record, kind, "answers", required=False) or [], ("answer", "raw"))
    if not question:
        raise Unusable("the question is empty")
    if not answers:
        raise Unusable("the answer list is empty")
    keys = [answer_key(a) for a in answers]
    counts = Counter(keys)
    top = max(counts.values())
    tied = [k for k, n in counts.items() if n == top]
    majority = _strings(field_value(record, kind, "majority", required=False) or [], ())
    chosen = (answer_key(majority[0]) if majority and answer_key(majority[0]) in tied
              else next(k for k in keys if k in tied))
    surface = Counter(a for a, k in zip(answers, keys) if k == chosen).most_common(1)[0][0]
    answer_type = field_value(record, kind, "answer_type", required=False)
    return [Parsed(kind, dataset, annotation_id(record, kind), surface, tuple(dict.fromkeys(answers)),
                   group=question_type(question[0], record, kind), question=question[0],
                   extra={"votes": top, "answers": len(answers), "tied": len(tied) > 1,
                          "answer_type": answer_type if isinstance(answer_type, str) else ""})]


def parse_class(record: dict, kind: TaskKind, dataset: str) -> list[Parsed]:
    label = _strings(field_value(record, kind, "label"), ("name", "label"))
    if not label:
        raise Unusable("the label is empty")
    synonyms = tuple(dict.fromkeys([label[0], *(s.strip() for s in label[0].split(",") if s.strip())]))
    return [Parsed(kind, dataset, annotation_id(record, kind), label[0], synonyms, question=kind.question)]


def parse_captions(record: dict, kind: TaskKind, dataset: str) -> list[Parsed]:
    captions = _strings(field_value(record, kind, "captions"), ("raw", "caption", "sent", "text"))
    if not captions:
        raise Unusable("the caption list is empty")
    return [Parsed(kind, dataset, annotation_id(record, kind), captions[0], tuple(dict.fromkeys(captions)),
                   question=kind.question)]


def parse_texts(record: dict, kind: TaskKind, dataset: str, settings: ReformSettings) -> list[Parsed]:
    texts = _strings(field_value(record, kind, "texts"), ("text", "utf8_string", "transcription", "word"))
    readable = [t for t in dict.fromkeys(texts) if len(t) >= settings.min_text_length and set(t) != {"#"}]
    if not readable:
        raise Unusable(f"no text of at least {settings.min_text_length} characters")
    annotation = annotation_id(record, kind)
    return [Parsed(kind, dataset, f"{annotation}#{i}" if len(readable) > 1 else annotation, text, tuple(texts),
                   question=kind.question) for i, text in enumerate(readable[:settings.per_annotation])]


def region_box(value: dict, item: Image) -> Box | None:
    """A region's box in unit xyxy (`geometry.unit_box`), or None where it gives none that is usable."""
    try:
        return unit_box(item.width, item.height, box=value.get("box"), box_px=value.get("box_px"),
                        bbox=value.get("bbox"))
    except (TypeError, ValueError):
        return None


def box_text(box: Box) -> str:
    return "({:.2f}, {:.2f}) to ({:.2f}, {:.2f})".format(*box)


def _record_box(record: dict, kind: TaskKind, item: Image) -> Box | None:
    found = {name: field_value(record, kind, name, required=False) for name in ("box", "box_px", "bbox")}
    return region_box(found, item)


def _category(value: Any) -> str:
    return "" if value is None else normalise_text(str(value))


def regions_of(item: Image, kinds: dict[str, TaskKind]) -> list[tuple[Box, str]]:
    """Every region the item's annotations name: grounding referents, their `regions` lists, and the
    objects supplied with the image (already in unit boxes)."""
    found: list[tuple[Box, str]] = []
    for record in records_of(item):
        kind = kinds.get(record.get("task", ""))
        if kind is None or kind.method != "regions":
            continue
        if (box := _record_box(record, kind, item)) is not None:
            found.append((box, _category(field_value(record, kind, "category", required=False))))
        for region in field_value(record, kind, "regions", required=False) or []:
            if isinstance(region, dict) and (box := region_box(region, item)) is not None:
                found.append((box, _category(region.get("label", region.get("category", region.get("category_id"))))))
    for obj in item.annotations.get("objects", []):
        found.append((tuple(obj["box"]), _category(obj.get("label"))))
    unique: dict[str, tuple[Box, str]] = {}
    for box, category in found:
        unique.setdefault(box_text(box), (box, category))
    return list(unique.values())


def objects_of(item: Image) -> tuple[tuple[str, frozenset[str]], ...]:
    """The objects supplied with the image, each as its label and attribute values (`answer_key` forms)."""
    return tuple((answer_key(o.get("label", "")), frozenset(answer_key(v) for v in (o.get("attributes") or {}).values()))
                 for o in item.annotations.get("objects", []) if isinstance(o, dict))


def parse_regions(record: dict, kind: TaskKind, dataset: str, item: Image,
                  settings: ReformSettings) -> list[Parsed]:
    expressions = _strings(field_value(record, kind, "expressions"), ("raw", "sent", "expression", "text"))
    if (box := _record_box(record, kind, item)) is None:
        raise Unusable("no usable box for the referent: bbox (COCO x, y, w, h), box or box_px is missing "
                       "or covers nothing inside the image")
    if not expressions:
        raise Unusable("the expression list is empty")
    annotation = annotation_id(record, kind)
    category = _category(field_value(record, kind, "category", required=False))
    return [Parsed(kind, dataset, f"{annotation}#{i}" if len(expressions) > 1 else annotation, box_text(box),
                   (box_text(box),), question=kind.question.format(expression=expression.replace('"', "'")),
                   extra={"box": box, "category": category, "expression": expression})
            for i, expression in enumerate(list(dict.fromkeys(expressions))[:settings.per_annotation])]


def parse(record: dict, item: Image, kinds: dict[str, TaskKind], settings: ReformSettings) -> list[Parsed]:
    if (kind := kinds.get(record.get("task", ""))) is None:
        raise Unusable(f"unknown task kind {record.get('task')!r}; known: {', '.join(sorted(kinds))}")
    dataset = str(record.get("dataset") or item.source)
    parsers = {"answers": parse_vqa, "classes": parse_class, "captions": parse_captions}
    if kind.method in parsers:
        return parsers[kind.method](record, kind, dataset)
    if kind.method == "texts":
        return parse_texts(record, kind, dataset, settings)
    return parse_regions(record, kind, dataset, item, settings)


@dataclass(slots=True)
class Reading:
    """One item's annotations read once a run, by the dimension they feed: the usable ones, and the
    reasons (by annotation id) of those that cannot become questions."""

    parsed: dict[str, list[Parsed]] = field(default_factory=dict)
    skipped: dict[str, dict[str, str]] = field(default_factory=dict)

    def of(self, dimension: Dimension) -> tuple[list[Parsed], dict[str, str]]:
        return self.parsed.get(dimension.key, []), self.skipped.get(dimension.key, {})


def read(item: Image, kinds: dict[str, TaskKind], settings: ReformSettings) -> Reading:
    """`item`'s reform annotations parsed; a referent's `extra["regions"]` holds every region of the
    image, shared (its candidates), so the item itself is not needed again."""
    reading, regions = Reading(), None
    for index, record in enumerate(records_of(item)):
        if (kind := kinds.get(record.get("task", ""))) is None:
            continue  # an unknown kind feeds no dimension (counted by the stage)
        try:
            found = parse(record, item, kinds, settings)
        except Unusable as exc:
            reading.skipped.setdefault(kind.dimension, {})[annotation_id(record, kind) or f"record {index}"] = str(exc)
            continue
        if kind.method == "regions":
            regions = regions_of(item, kinds) if regions is None else regions
            for p in found:
                p.extra["regions"] = regions
        if kind.method == "captions":
            for p in found:
                p.extra["objects"] = objects_of(item)
        reading.parsed.setdefault(kind.dimension, []).extend(found)
    for dimension, found in reading.parsed.items():
        # every string written in the image answers "which of these is written in the image?", whichever
        # row holds it (TextOCR ships one word per row): all of them are accepted by each of its questions
        if written := tuple(dict.fromkeys(a for p in found if p.kind.method == "texts" for a in p.accepted)):
            reading.parsed[dimension] = [replace(p, accepted=written) if p.kind.method == "texts" else p
                                         for p in found]
    return reading
