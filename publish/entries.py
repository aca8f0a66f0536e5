"""What one published question is: the human-reviewed answer and dimension, its media and provenance.

Pure functions over store records; nothing here touches files or the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath, PureWindowsPath

from benchsmith.dimensions import Registry
from benchsmith.records import LETTERS, Item, Question, pictures, stable_hash


@dataclass(frozen=True)
class Entry:
    """One row of a release, before its images are encoded."""

    question_id: str
    question: str
    choices: tuple[str, str, str, str]
    answer: str
    media: tuple[str, ...]          # paths relative to the media folder: one image, a set's images, a video's frames
    data_type: str
    question_type_id: int
    category: str
    config: str                     # the dimension key, which names the per-dimension config
    data_id: str
    source: str
    generator: str
    model: str
    agreement: float | None
    annotators: int

    @property
    def content_hash(self) -> str:
        """Changes whenever anything a user of the release sees in this question changes."""
        return stable_hash(self.question, self.choices, self.answer, self.data_type, self.question_type_id,
                           self.data_id, self.media)


def public_name(value: str | None) -> str:
    """A model or source name safe to publish: a local path is cut down to its last component."""
    if not value:
        return ""
    for flavour in (PurePosixPath, PureWindowsPath):
        path = flavour(value)
        if path.is_absolute() or value.startswith(("~", "./", "../")):
            return path.name
    return value


def agreement(final_answer: int, reviewer_answers: Sequence[int | None]) -> float | None:
    """The share of annotators who chose the published answer; None when nobody reviewed it.

    An annotator who discarded the question (no answer) counts as disagreeing.
    """
    if not reviewer_answers:
        return None
    return sum(answer == final_answer for answer in reviewer_answers) / len(reviewer_answers)


def entry_for(question: Question, item: Item, reviewer_answers: Sequence[int | None],
              dimensions: Registry) -> Entry:
    """The published form of an accepted question; the human answer and dimension win when set."""
    answer = question.final_answer
    dimension = dimensions.get(question.final_dimension_id)
    return Entry(
        question_id=question.id, question=question.text, choices=tuple(question.options), answer=LETTERS[answer],
        media=tuple(pictures(item)), data_type=item.kind, question_type_id=dimension.id, category=dimension.name,
        config=dimension.key, data_id=item.id, source=public_name(item.source),
        generator=question.provenance.backend, model=public_name(question.provenance.model),
        agreement=agreement(answer, reviewer_answers), annotators=len(reviewer_answers),
    )
