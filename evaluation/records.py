"""The records evaluation works on. Pure data; nothing here loads a model or touches the store."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from benchsmith.records import LETTERS, Turn, stable_hash


@dataclass(frozen=True)
class EvalQuestion:
    """One multiple-choice question as a model under test meets it."""

    question_id: str
    text: str
    options: tuple[str, ...]
    answer: int                     # index of the key in `options`
    dimension: str                  # dimension key, e.g. "instance_counting"
    data_type: str = "image"        # image | image_set | video
    image_id: str = ""              # the image (or video) it is about; questions on one image share it
    frames: tuple[bytes, ...] = field(default=(), repr=False)  # encoded image(s): a set's, a video's frames
    frame_files: tuple[Path, ...] = ()  # or the files that hold them, read only when a model needs them
    content_hash: str = ""          # changes whenever anything the model sees changes

    @property
    def n_frames(self) -> int:
        return len(self.frames) or len(self.frame_files)

    def encoded(self, at_most: int) -> list[bytes]:
        """The encoded images a model is shown: a video's frames spread to at most `at_most`, every image
        of an image set (the question numbers them all). Files are read now, so a run holds only the
        images of the passes a model is working on."""
        if self.frames:
            return spread(self.frames, self.n_shown(at_most))
        return [path.read_bytes() for path in spread(self.frame_files, self.n_shown(at_most))]

    def n_shown(self, at_most: int) -> int:
        return min(self.n_frames, at_most) if self.data_type == "video" else self.n_frames

    def images(self, at_most: int) -> list:
        """`encoded(at_most)` as RGB PIL images."""
        from PIL import Image

        return [Image.open(io.BytesIO(data)).convert("RGB") for data in self.encoded(at_most)]


T = TypeVar("T")


def spread(frames: Sequence[T], at_most: int) -> list[T]:
    """At most `at_most` frames, evenly spaced, first and last included."""
    if len(frames) <= at_most:
        return list(frames)
    if at_most == 1:
        return [frames[len(frames) // 2]]
    return [frames[round(i * (len(frames) - 1) / (at_most - 1))] for i in range(at_most)]


@dataclass(frozen=True)
class Pass:
    """One showing of a question: its options in `order` (shown position -> original index), worded
    with prompt template number `template`. `key` names the pass within its question."""

    question: EvalQuestion
    key: str = "single"
    order: tuple[int, ...] = ()
    template: int = 0

    def __post_init__(self) -> None:
        if not self.order:
            object.__setattr__(self, "order", tuple(range(len(self.question.options))))

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(self.question.options[i] for i in self.order)

    @property
    def key_shown(self) -> int:
        """Where the right answer is shown in this pass."""
        return self.order.index(self.question.answer)

    @property
    def subject(self) -> str:
        return f"{self.question.question_id}:{self.question.content_hash[:12]}:{self.key}"

    def options_block(self) -> str:
        """The shown options as lines "A. text"."""
        return "\n".join(f"{LETTERS[i]}. {text}" for i, text in enumerate(self.options))

    def original(self, shown: int | None) -> int | None:
        """The original option index of a shown position."""
        return None if shown is None else self.order[shown]


@dataclass(frozen=True)
class ModelAnswer:
    """What a model made of one pass.

    `choice` is a shown position, or None when the output matched no option (a format miss, which
    scores as wrong). `skipped` says why the model could not take the pass at all (a video for an
    image-only model): recorded, not scored. `retry` says why it should be asked again on the next run
    (an HTTP failure): nothing is recorded."""

    choice: int | None = None
    scores: tuple[float, ...] = ()
    raw: str = ""
    matched_by: str = ""            # likelihood | letter | option_text | llm | blind | "" (unmatched)
    votes: tuple[int | None, ...] = ()  # judge ensemble votes; when there are any, they decide correctness
    skipped: str = ""
    retry: str = ""


@dataclass(frozen=True)
class EvalConversation:
    """One three-turn conversation as a model under test meets it (ConvEval): its turns and the image."""

    conversation_id: str
    turns: tuple[Turn, ...]
    frames: tuple[bytes, ...] = field(default=(), repr=False)
    content_hash: str = ""

    @staticmethod
    def of(conversation_id: str, turns: Sequence[Turn], frames: Sequence[bytes]) -> EvalConversation:
        digest = [hashlib.sha256(frame).hexdigest()[:16] for frame in frames]
        return EvalConversation(conversation_id, tuple(turns), tuple(frames),
                                stable_hash([t.model_dump() for t in turns], digest))
