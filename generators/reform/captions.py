"""Which labels a caption names, read against the objects supplied with an image (data/caption_objects.yaml).

Supplied objects (COCO instances) label every instance of their classes, so a caption that names a label
the image has no object of, or names it with attributes none of its objects has, cannot describe the image:
it is a wrong option that can be shown to be wrong. A caption that names only what the image has, or
nothing that can be checked, is never offered as wrong; and the key is a caption of the image that names
at least one of its objects and nothing it lacks, so the key is never the one option with no checkable noun.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from benchsmith.paths import DATA_DIR
from benchsmith.settings import parse_yaml

CAPTION_OBJECTS_FILE = DATA_DIR / "caption_objects.yaml"
_WORD = re.compile(r"[a-z]+")

Objects = tuple[tuple[str, frozenset[str]], ...]   # (label, attribute values), as `parsing.objects_of` gives them


@dataclass(frozen=True)
class Mention:
    label: str
    attributes: frozenset[str]
    proof: bool          # the words always mean a thing of this label (not a synonym, a homonym or a likeness)


@lru_cache(maxsize=4)
def _words_file(path: Path | None = None) -> dict:
    return parse_yaml((path or CAPTION_OBJECTS_FILE).read_text(encoding="utf-8"))


def _forms(word: str) -> set[str]:
    """`word` and its plural, as captions write them."""
    from generators.programmatic import load_vocabulary, plural

    return {word, plural(word, load_vocabulary()).casefold()}


class CaptionReader:
    """The phrases (one or two words) that name each of `labels`, with whether they prove it."""

    def __init__(self, labels: frozenset[str], attributes: frozenset[str], path: Path | None = None) -> None:
        from generators.programmatic import load_vocabulary

        words, vocabulary = _words_file(path), load_vocabulary()
        homonyms = {h.casefold() for h in words.get("homonyms", ())}
        self.no_proof = frozenset(w.casefold() for w in words.get("no_proof", ()))
        self.attributes = attributes
        self.phrases: dict[str, list[tuple[str, bool]]] = {}   # phrase -> (label, proof)
        for label in sorted(labels):
            for form in _forms(label):
                self._add(form, label, form not in homonyms and label not in homonyms)
            for kind in words.get("kinds", {}).get(label, ()):
                for form in _forms(kind.casefold()):
                    self._add(form, label, form not in homonyms)
            for synonym in vocabulary.synonyms.get(label, ()):
                for form in _forms(synonym.casefold()):
                    self._add(form, label, False)
        for homonym in homonyms:   # "train car" is read as one phrase that proves nothing
            self.phrases.setdefault(homonym, [])

    def _add(self, phrase: str, label: str, proof: bool) -> None:
        self.phrases.setdefault(phrase, []).append((label, proof))

    def mentions(self, caption: str) -> tuple[Mention, ...]:
        """The labels `caption` names, each with the attribute words just before it ("a pink star")."""
        words = _WORD.findall(caption.casefold())
        provable = not self.no_proof.intersection(words)
        found, i = [], 0
        while i < len(words):
            size = next((n for n in (2, 1) if i + n <= len(words) and " ".join(words[i:i + n]) in self.phrases), 0)
            if size:
                start = i
                while start and words[start - 1] in self.attributes:
                    start -= 1
                for label, proof in self.phrases[" ".join(words[i:i + size])]:
                    found.append(Mention(label, frozenset(words[start:i]), proof and provable))
            i += size or 1
        return tuple(found)


def _has(objects: Objects, mention: Mention) -> bool:
    return any(label == mention.label and mention.attributes <= values for label, values in objects)


def contradicts(mentions: tuple[Mention, ...], objects: Objects) -> bool:
    """Whether the caption surely names something the image does not show: a label none of its objects
    has, or has with the attributes the caption gives."""
    return any(m.proof and not _has(objects, m) for m in mentions)


def fits(mentions: tuple[Mention, ...], objects: Objects) -> bool:
    """Whether the caption can be the key: it surely names something the image shows, and nothing it lacks."""
    return any(m.proof for m in mentions) and not contradicts(mentions, objects)
