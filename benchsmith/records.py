"""Typed records that flow between stages and into the store.

Ids are derived from content, so running a stage twice yields the same ids and the store's upserts
turn a rerun into a no-op.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from datetime import datetime, timezone
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

FactKind = Literal["caption", "tag", "object", "region", "ocr"]
ItemStatus = Literal["candidate", "dropped", "superseded", "in_review", "accepted", "rejected", "published",
                         "withdrawn"]  # of every kind of benchmark item: question, conversation

# Allowed moves of a benchmark item, of any kind. Nothing is deleted: a drop, a rejection or a withdrawal
# is a status plus a reason. A move to the same status (accepted -> accepted, published -> published) is a
# revision: review changed the item's reviewed content, and its history says why.
TRANSITIONS: dict[str, frozenset[str]] = {
    "candidate": frozenset({"dropped", "superseded", "in_review"}),  # superseded: generated again
    "in_review": frozenset({"accepted", "rejected"}),
    "accepted": frozenset({"accepted", "published", "withdrawn"}),
    "published": frozenset({"published", "withdrawn"}),
    "dropped": frozenset(),
    "superseded": frozenset(),
    "rejected": frozenset(),
    "withdrawn": frozenset(),
}

# The stage of the quality gate every generated item passes first. Its failed verdict drops the item, so
# such a verdict never sits on an item that is `candidate` or later (the store refuses it).
GATE_STAGE = "quality"

LETTERS = "ABCD"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def aware(when: datetime) -> datetime:
    """A stored time as an aware one: SQLite hands back UTC times without their zone."""
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stable_hash(*parts: Any, length: int = 32) -> str:
    """A short hex digest of JSON-serialisable parts, stable across processes and machines."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


def rotation(n: int, shift: int) -> tuple[int, ...]:
    """The order of `n` options shifted left by `shift`: shown option i is original option (i + shift) mod n."""
    return tuple((i + shift) % n for i in range(n))


_SPACE = re.compile(r"\s+")


@lru_cache(maxsize=1 << 15)
def normalise_text(text: str) -> str:
    """Case-, width- and whitespace-insensitive form used for ids and duplicate checks."""
    # cached: the gate, ids and the store normalise the same options many times over
    text = unicodedata.normalize("NFKC", text).casefold().strip()
    return _SPACE.sub(" ", text).rstrip(" ?.!")


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class Provenance(Record):
    """Who made a fact or question, and what it cost."""

    backend: str
    model: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    prompt_version: str | None = None
    temperature: float | None = None
    seed: int | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


class ItemRecord(Record):
    """What every kind of item has: a content id, its size in pixels (a set's: its first image's), where it
    came from, and the annotations supplied with it."""

    id: str
    width: int = 0
    height: int = 0
    source: str = ""
    license: str = ""
    original_name: str = ""
    annotations: dict[str, Any] = Field(default_factory=dict)


class Image(ItemRecord):
    """One ingested image. `path` is the normalised copy, relative to the workspace media folder."""

    path: str
    width: int
    height: int
    phash: str = ""  # perceptual hash (ingest.near_duplicates): the same picture in other bytes is near it
    kind: Literal["image"] = "image"


class Video(ItemRecord):
    """One ingested video with its supplied temporal annotations and the frames sampled for review."""

    path: str
    fps: float = 0.0
    n_frames: int = 0
    frames: list[str] = Field(default_factory=list)
    kind: Literal["video"] = "video"


class ImageSet(ItemRecord):
    """An ordered set of two to six stored images that one question asks about together. Its members are
    ordinary image items; `paths` repeats their media paths in the same order, so review, publish and
    evaluation read the set without a lookup. The id covers the members and their order."""

    images: list[str]          # the member images' ids, in the order questions number them (image 1 first)
    paths: list[str]           # their media paths, in the same order
    kind: Literal["image_set"] = "image_set"

    @property
    def path(self) -> str:
        return self.paths[0]

    @staticmethod
    def of(members: Sequence[Image], **fields: Any) -> "ImageSet":
        """The set of these images in this order; the same members in another order are another set."""
        if not 2 <= len(members) <= MAX_SET_IMAGES:
            raise ValueError(f"an image set holds 2 to {MAX_SET_IMAGES} images, not {len(members)}")
        ids = [m.id for m in members]
        return ImageSet(id=stable_hash("image_set", ids), images=ids, paths=[m.path for m in members],
                        width=members[0].width, height=members[0].height, **fields)


MAX_SET_IMAGES = 6
Item = Image | Video | ImageSet


def pictures(item: Item) -> list[str]:
    """The media paths a question about `item` shows, in order: its image, a video's sampled frames, or a
    set's images."""
    return list(item.frames) if item.kind == "video" else list(item.paths) if item.kind == "image_set" else [item.path]


Box = tuple[float, float, float, float]
Point = tuple[float, float]


def _check_unit(values: tuple[float, ...], what: str) -> None:
    for value in values:
        if not -1e-6 <= value <= 1 + 1e-6:
            raise ValueError(f"{what} must be normalised to [0, 1], got {values}")


class Fact(Record):
    """One thing an extractor saw in an item.

    - caption / region: `text` (a region also has `box`);
    - tag: `text` is the label, `score` its confidence;
    - object: `text` is the label, `box` is normalised xyxy, `attributes` e.g. {"colour": "red"};
    - ocr: `text` with `quad`, four normalised corner points, and `score`.
    """

    item_id: str
    kind: FactKind
    text: str
    box: Box | None = None
    quad: tuple[Point, Point, Point, Point] | None = None
    score: float | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    provenance: Provenance

    @model_validator(mode="after")
    def _shape_fits_kind(self) -> Fact:
        if self.kind in ("object", "region") and self.box is None:
            raise ValueError(f"a {self.kind} fact needs a box")
        if self.kind == "ocr" and self.quad is None:
            raise ValueError("an ocr fact needs a quad")
        if self.box is not None:
            _check_unit(self.box, "box")
            x1, y1, x2, y2 = self.box
            if x2 < x1 or y2 < y1:
                raise ValueError(f"box must be x1<=x2, y1<=y2, got {self.box}")
        if self.quad is not None:
            _check_unit(tuple(v for point in self.quad for v in point), "quad")
        return self

    @property
    def id(self) -> str:
        return stable_hash(
            self.item_id, self.kind, self.text, self.box, self.quad, self.attributes,
            self.provenance.backend, self.provenance.model, self.provenance.params,
        )


class Question(Record):
    """A four-option multiple-choice question about one item."""

    item_id: str
    dimension_id: int
    text: str
    options: list[str]
    answer: int
    provenance: Provenance
    meta: dict[str, Any] = Field(default_factory=dict)
    status: ItemStatus = "candidate"
    review_answer: int | None = None
    review_dimension_id: int | None = None

    @field_validator("options")
    @classmethod
    def _four_options(cls, options: list[str]) -> list[str]:
        if len(options) != 4:
            raise ValueError(f"a question needs exactly 4 options, got {len(options)}")
        return options

    @field_validator("answer")
    @classmethod
    def _answer_in_range(cls, answer: int) -> int:
        if not 0 <= answer < 4:
            raise ValueError(f"answer must be an index 0-3, got {answer}")
        return answer

    @property
    def id(self) -> str:
        return question_id(self.item_id, self.dimension_id, self.text, self.options)

    @property
    def final_answer(self) -> int:
        """The reviewers' answer when they gave one, else the generated one."""
        return self.answer if self.review_answer is None else self.review_answer

    @property
    def final_dimension_id(self) -> int:
        """The reviewers' dimension when they changed it, else the generated one."""
        return self.dimension_id if self.review_dimension_id is None else self.review_dimension_id


def question_id(item_id: str, dimension_id: int, text: str, options: list[str]) -> str:
    """Stable across runs and versions; the option order does not change it, so shuffling is safe."""
    return _question_id(item_id, dimension_id, text, tuple(sorted(options)))


@lru_cache(maxsize=1 << 14)
def _question_id(item_id: str, dimension_id: int, text: str, options: tuple[str, ...]) -> str:
    # a question's id is asked for at every step of a commit (gate, letters, store): hashed once a commit,
    # keyed on the sorted options so the reordered copy that balancing makes finds it too
    return stable_hash(item_id, dimension_id, normalise_text(text), sorted(normalise_text(o) for o in options))


class Verdict(Record):
    """The outcome of one check on one subject: an input file, an item or a question."""

    subject_id: str
    subject_kind: Literal["input", "item", "question", "conversation"]
    stage: str
    rule: str
    passed: bool
    reason: str = ""
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def id(self) -> str:
        return stable_hash(self.subject_id, self.stage, self.rule)


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class ReviewVersion(Record):
    """One version of one annotator's review of a benchmark item, as pulled back from Label Studio: keep or
    discard with reasons, plus what the item's kind lets them change. Every distinct version is its own
    record (the id hashes it), so no edit replaces another; `submitted_at` is when Label Studio saved it."""

    kind: ClassVar[str]
    subject_field: ClassVar[str]            # the field naming the item reviewed
    content_fields: ClassVar[tuple[str, ...]]  # what the annotator could change, beyond keep or discard

    task_id: int
    annotation_id: int
    annotator: str
    keep: bool = True
    reasons: list[str] = Field(default_factory=list)
    comment: str = ""
    submitted_at: datetime = EPOCH

    @property
    def subject_id(self) -> str:
        return getattr(self, self.subject_field)

    @property
    def id(self) -> str:
        return stable_hash(self.kind, self.task_id, self.annotation_id, self.keep, sorted(self.reasons), self.comment,
                           self.model_dump(mode="json", include=set(self.content_fields)), self.submitted_at)


class Review(ReviewVersion):
    """A review of a question: the answer and dimension the annotator chose."""

    kind: ClassVar[str] = "question"
    subject_field: ClassVar[str] = "question_id"
    content_fields: ClassVar[tuple[str, ...]] = ("answer", "dimension_id")

    question_id: str
    answer: int | None = None
    dimension_id: int | None = None


Level = Literal["perception", "reasoning", "creation"]
LEVELS: tuple[Level, ...] = ("perception", "reasoning", "creation")  # the order of a conversation's turns


class Turn(Record):
    """One turn of a conversation: what the user asks, a reference answer, and the points a good answer
    must make. `level` is the capability the turn tests; `task` names the kind of task within it
    (e.g. "object counting", "cause inference", "story writing")."""

    level: Level
    task: str = ""
    instruction: str
    reference: str
    focus_points: list[str] = Field(default_factory=list)


class Conversation(Record):
    """A multi-turn conversation about one image, each turn building on the ones before (ConvBench):
    perception, then reasoning about what was perceived, then creation from both.

    The id comes from the turns as generated; edits made in review live in `review_turns` (the last
    accepted edit) and in the conversation's reviews (every version), so the id never moves.
    """

    item_id: str
    turns: list[Turn]
    provenance: Provenance
    meta: dict[str, Any] = Field(default_factory=dict)
    status: ItemStatus = "candidate"
    review_turns: list[Turn] | None = None

    @property
    def id(self) -> str:
        return conversation_id(self.item_id, [t.instruction for t in self.turns])

    @property
    def final_turns(self) -> list[Turn]:
        """The turns as reviewed when a reviewer edited them, else as generated."""
        return self.review_turns if self.review_turns is not None else self.turns


def conversation_id(item_id: str, instructions: list[str]) -> str:
    return stable_hash("conversation", item_id, [normalise_text(i) for i in instructions])


class ConversationReview(ReviewVersion):
    """A review of a conversation: its turns as the annotator left them, edited or not."""

    kind: ClassVar[str] = "conversation"
    subject_field: ClassVar[str] = "conversation_id"
    content_fields: ClassVar[tuple[str, ...]] = ("turns",)

    conversation_id: str
    turns: list[Turn]


REVIEW_KINDS: dict[str, type[ReviewVersion]] = {cls.kind: cls for cls in (Review, ConversationReview)}


class Release(Record):
    """A published version of the benchmark."""

    version: str
    question_ids: list[str]
    path: str = ""
    changelog: dict[str, list[str]] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)
