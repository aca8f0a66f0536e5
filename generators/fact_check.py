"""A check of LLM-written questions against the facts they were written from, before the blind filter.

An LLM can pick a wrong key, count what it was not told about, or name an object that is not there. Where
the key makes a claim the facts decide, the claim is checked:

- a count (`instances_counting`): the key is the number of objects of the label the question names;
- a presence (`instance_identity`): the key names a thing the facts mention, and no other option names
  an object that is there too (two right answers);
- a region (`instance_location`): the named object's centre lies in the part of the image the key says;
- a relation (`spatial_relation`): the first object the question names lies where the key says of the
  second (left, right, above, below), by the same rule as the programmatic questions; or, where the key
  is an object ("Which object is left of the dog?"), it lies there and no other option does;
- a text (`text_understanding`): the key was read in the image.

The same rules also give, per dimension, the answers the facts settle (`candidates`): what is true (a
label's exact count, an object present, a lone object's region, a relation between two) with values they
make false (other counts, absent labels, other regions and directions, words not read). The LLM generator
can show them to the model, so a weak model picks its key and wrong options among answers this check confirms.

A question whose claim fails is dropped (`meta["dropped"]`, rule `fact_check`) with the reason; one that
passes says `meta["fact_check"] = "verified"`; one the facts cannot decide (a dimension with no rule, a
label the facts do not name once, a crowd region that hides a count, a box on a grid line) says
`"unchecked: <why>"`, so review knows where to look hardest.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from benchsmith.records import Fact, Question, normalise_text
from extractors.context import text_reads
from generators.programmatic import COLUMNS, ROWS, Thing, grid_cell, region_name, relation, things_in

RULE = "fact_check"
VERIFIED = "verified"
NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                "sixteen seventeen eighteen nineteen twenty").split()
ROW_WORDS = {"top": 0, "upper": 0, "middle": 1, "bottom": 2, "lower": 2}
COLUMN_WORDS = {"left": 0, "centre": 1, "center": 1, "middle": 1, "right": 2}
DIRECTIONS = ("left", "right", "above", "below")
ASKS_TEXT = re.compile(r"\b(says?|written|writes?|reads?|words?|text|letters?|spell\w*|printed)\b", re.IGNORECASE)


@lru_cache(maxsize=1 << 14)
def _singular(word: str) -> str:
    from generators.programmatic import _inflection
    return _inflection().singular_noun(word) or word


def _norm(text: str) -> str:
    """Lower case, words only, each word singular: 'Two red cars.' -> 'two red car'."""
    return " ".join(_singular(w) for w in re.findall(r"[a-z0-9]+", normalise_text(text)))


def _named(text: str, labels: Sequence[str]) -> list[str]:
    """The labels `text` names, in the order it names them (each once; 'hot dog' is not also 'dog')."""
    words = f" {_norm(text)} "
    found: list[tuple[int, int, str]] = []
    for label in sorted(set(labels), key=lambda l: len(_norm(l)), reverse=True):
        at = words.find(f" {_norm(label)} ")
        end = at + len(_norm(label)) + 1
        if at >= 0 and not any(start <= at < stop or start < end <= stop for start, stop, _l in found):
            found.append((at, end, label))
    return [label for _at, _end, label in sorted(found)]


def _number(option: str) -> int | None:
    words = _norm(option).split()
    if len(words) != 1:
        return None
    word = words[0]
    return int(word) if word.isdigit() else NUMBER_WORDS.index(word) if word in NUMBER_WORDS else None


def _counting(question: Question, things: list[Thing], facts: list[Fact]) -> str | None:
    key = _number(question.options[question.answer])
    if key is None:
        return "unchecked: the key is not a number"
    named = _named(question.text, [t.label for t in things])
    if len(named) != 1:
        return f"unchecked: the question names {len(named)} labels of the objects"
    label = named[0]
    if _crowded(label, facts):
        return f"unchecked: a crowd region of {label} hides the count"
    count = sum(t.label == label for t in things)
    if key != count:
        return f"the key says {key} {label}, the facts have {count}"
    also = [o for o in _wrong(question) if _number(o) == count]
    return f"option {also[0]!r} is the count too" if also else VERIFIED


def _crowded(label: str, facts: list[Fact]) -> bool:
    """Whether a crowd region of `label` hides how many there are."""
    return any(f.kind == "object" and f.text.strip().lower() == label and f.attributes.get("crowd") == "true" for f in facts)


def _wrong(question: Question) -> list[str]:
    """The options that are not the key."""
    return [o for i, o in enumerate(question.options) if i != question.answer]


@dataclass(frozen=True)
class Mentions:
    """What an image's facts say is in it: object labels, and everything tags, captions and region
    captions name (written with `_norm`)."""

    labels: frozenset[str]
    mentioned: frozenset[str]
    captions: str

    @classmethod
    def of(cls, things: list[Thing], facts: list[Fact]) -> Mentions:
        labels = frozenset(_norm(t.label) for t in things)
        return cls(labels, labels | {_norm(f.text) for f in facts if f.kind == "tag"},
                   " ".join(f" {_norm(f.text)} " for f in facts if f.kind in ("caption", "region")))

    def present(self, option: str) -> bool:
        """An object of the facts: a label, or a name ending in one ('black dog')."""
        name = _norm(option)
        return name in self.labels or any(name.endswith(f" {l}") for l in self.labels)

    def said(self, option: str) -> bool:
        name = _norm(option)
        return name in self.mentioned or f" {name} " in self.captions


def _presence(question: Question, things: list[Thing], facts: list[Fact]) -> str | None:
    facts_say = Mentions.of(things, facts)
    key = question.options[question.answer]
    if len(_norm(key).split()) > 3:
        return "unchecked: the key is not a name"
    if not (facts_say.said(key) or facts_say.present(key)):
        return f"the key {key!r} names nothing the facts mention"
    others = _wrong(question)
    if present := [o for o in others if facts_say.present(o)]:
        return f"option {present[0]!r} is in the image too"
    said = [o for o in others if facts_say.said(o)]
    return f"unchecked: option {said[0]!r} is mentioned in the facts too" if said else VERIFIED


def _region(option: str) -> tuple[int | None, int | None]:
    """The (row, column) of the image an option names ('top left' -> (0, 0), 'left' -> (None, 0))."""
    words = _norm(option).split()
    row = next((ROW_WORDS[w] for w in words if w in ROW_WORDS), None)
    column = next((COLUMN_WORDS[w] for w in words if w in COLUMN_WORDS and not (w == "middle" and row == 1)), None)
    if words in (["centre"], ["center"]):
        row, column = 1, 1
    return row, column


def _cell(thing: Thing, margin: float) -> tuple[int | None, int | None]:
    """The (column, row) of the image's thirds `thing`'s centre lies in; None along an axis where it is
    within `margin` of a dividing line."""
    column, row = (grid_cell(v, margin) for v in thing.centre)
    return column, row


def _location(question: Question, things: list[Thing], margin: float) -> str | None:
    row, column = _region(question.options[question.answer])
    if row is None and column is None:
        return "unchecked: the key names no part of the image"
    named = _named(question.text, [t.label for t in things])
    matching = [t for t in things if named and t.label == named[0]]
    if len(named) != 1 or len(matching) != 1:
        return "unchecked: the question does not name one object of the facts"
    at_column, at_row = _cell(matching[0], margin)
    if (row is not None and at_row is None) or (column is not None and at_column is None):
        return "unchecked: the object lies on a line between parts"
    if (row is not None and row != at_row) or (column is not None and column != at_column):
        where = " ".join(part for part in (ROWS[at_row] if row is not None else "",
                                           COLUMNS[at_column] if column is not None else "") if part)
        return f"the key says {question.options[question.answer]!r}, the {named[0]} is at the {where}"
    also = [o for o in _wrong(question) if _region(o) != (None, None)
            and _region(o)[0] in (None, at_row) and _region(o)[1] in (None, at_column)]
    return f"option {also[0]!r} is where the {named[0]} is too" if also else VERIFIED


def _once(label: str, things: list[Thing]) -> bool:
    """Whether the facts have exactly one `label`, so a question naming it names one object."""
    return sum(t.label == label for t in things) == 1


def _relation(question: Question, things: list[Thing]) -> str | None:
    """'Where is the A relative to the B?' with a direction as the key, or 'Which object is left of
    the B?' with an object as the key (then no other option may lie there too)."""
    labels = [t.label for t in things]
    once = lambda label: _once(label, things)  # noqa: E731
    thing = lambda label: next(t for t in things if t.label == label)  # noqa: E731
    key_words = _norm(question.options[question.answer]).split()
    said = [d for d in DIRECTIONS if d in key_words]
    if len(said) == 1:
        named = _named(question.text, labels)
        if len(named) != 2 or not all(once(n) for n in named):
            return "unchecked: the question does not name two objects the facts have once each"
        where = relation(thing(named[0]), thing(named[1]), 0.0)
        if where is None:
            return "unchecked: the two boxes are not apart along one side"
        if where != said[0]:
            return f"the key says {said[0]}, the {named[0]} is {where} of the {named[1]}"
        also = [o for o in _wrong(question) if where in _norm(o).split()]
        return f"option {also[0]!r} says {where} too" if also else VERIFIED
    asked = [d for d in DIRECTIONS if d in _norm(question.text).split()]
    anchor, key = _named(question.text, labels), _named(question.options[question.answer], labels)
    if len(asked) != 1 or len(anchor) != 1 or len(key) != 1 or not (once(anchor[0]) and once(key[0])):
        return "unchecked: the question and key do not name objects the facts have once each"
    where = relation(thing(key[0]), thing(anchor[0]), 0.0)
    if where is None:
        return "unchecked: the two boxes are not apart along one side"
    if where != asked[0]:
        return f"the key's {key[0]} is {where} of the {anchor[0]}, not {asked[0]}"
    also = [o for o in _wrong(question)
            for n in _named(o, labels) if once(n) and n != anchor[0] and relation(thing(n), thing(anchor[0]), 0.0) == asked[0]]
    return f"option {also[0]!r} is {asked[0]} of the {anchor[0]} too" if also else VERIFIED


def _read(text: str, reads: list[str]) -> bool:
    """Whether `text` (normalised) was read in the image: it holds a read line or a line holds it."""
    return any(text in r or r in text for r in reads if r and text)


def _text(question: Question, facts: list[Fact]) -> str | None:
    if not ASKS_TEXT.search(question.text):
        return "unchecked: the question does not ask what is written"
    key = normalise_text(question.options[question.answer])
    reads = [normalise_text(f.text) for f in text_reads(facts)]
    if not reads:
        return "unchecked: no text was read in the image"
    read = lambda option: _read(option, reads)  # noqa: E731
    if not read(key):
        return f"the key {question.options[question.answer]!r} was not read in the image"
    also = [o for o in _wrong(question) if read(normalise_text(o))]
    return f"option {also[0]!r} was read in the image too" if also else VERIFIED


def verdict(question: Question, dimension_key: str, facts: list[Fact], grid_margin: float = 0.04) -> str:
    """'verified', 'unchecked: why', or the reason the key's claim fails against `facts`."""
    things = things_in(facts)
    if dimension_key == "instances_counting":
        return _counting(question, things, facts)
    if dimension_key == "instance_identity":
        return _presence(question, things, facts)
    if dimension_key == "instance_location":
        return _location(question, things, grid_margin)
    if dimension_key == "spatial_relation":
        return _relation(question, things)
    if dimension_key == "text_understanding":
        return _text(question, facts)
    return f"unchecked: no fact check for {dimension_key}"


def checked(questions: list[Question], dimension_key: str, facts: list[Fact],
            keep: str = "unrefuted") -> list[Question]:
    """`questions` with the fact check's verdict in their meta: a failed one dropped with its reason, and
    with `keep="confirmed"` an unchecked one too (`kept`)."""
    out = []
    for question in questions:
        said = verdict(question, dimension_key, facts)
        if said == VERIFIED or said.startswith("unchecked"):
            meta = question.meta | {RULE: said}
        else:
            meta = question.meta | {RULE: "failed", "dropped": said, "drop_rule": RULE}
        out.append(question.model_copy(update={"meta": meta}))
    return kept(out, keep)


def kept(questions: list[Question], keep: str) -> list[Question]:
    """Under `keep="confirmed"`, every question the fact check did not verify is dropped, the reason saying
    what the facts could not decide; under `unrefuted`, `questions` as they are."""
    if keep == "unrefuted":
        return questions
    return [q if q.meta.get(RULE) == VERIFIED or "dropped" in q.meta else q.model_copy(update={"meta": q.meta | {
                "dropped": f"not confirmed by the facts ({q.meta.get(RULE, 'unchecked')})", "drop_rule": RULE}})
            for q in questions]


# -- Candidate answers: what the same rules settle, for a prompt ---------------------------------------

@dataclass(frozen=True)
class Candidate:
    """An answer the facts settle: what a question would be about (`subject`: labels, none for identity
    and text), the true value, and values the facts make false. A question keyed `true` with wrong
    options from `false` passes `verdict`."""

    subject: tuple[str, ...]
    true: str
    false: tuple[str, ...]


def candidates(dimension_key: str, facts: list[Fact], *, labels: Sequence[str], words: Sequence[str],
               rng: random.Random, most: int = 6, wrong: int = 3, grid_margin: float = 0.04) -> list[Candidate]:
    """Up to `most` candidates for `dimension_key` from `facts`, each with `wrong` false values drawn with
    `rng`: absent labels from `labels` (neither an object nor named by a caption or tag), words not read
    from `words`. A dimension the check has no rule for has none."""
    things = things_in(facts)
    once = sorted({t.label for t in things if not t.crowd and _once(t.label, things)})
    found: list[Candidate] = []
    if dimension_key == "instances_counting":
        for label in sorted({t.label for t in things} - {t.label for t in things if t.crowd}):
            if not _crowded(label, facts):
                n = sum(t.label == label for t in things)
                near = sorted({0, *range(max(0, n - 2), n + 4)} - {n})
                found.append(Candidate((label,), str(n), tuple(str(v) for v in sorted(rng.sample(near, wrong)))))
    elif dimension_key == "instance_identity":
        facts_say = Mentions.of(things, facts)
        absent = [l for l in dict.fromkeys(labels) if not (facts_say.present(l) or facts_say.said(l))]
        for label in sorted({t.label for t in things}):
            if len(absent) >= wrong and len(_norm(label).split()) <= 3:
                found.append(Candidate((), label, tuple(rng.sample(absent, wrong))))
    elif dimension_key == "instance_location":
        for label in once:
            column, row = _cell(next(t for t in things if t.label == label), grid_margin)
            if column is not None and row is not None:
                others = [region_name(r, c) for r in range(3) for c in range(3) if (r, c) != (row, column)]
                found.append(Candidate((label,), region_name(row, column), tuple(rng.sample(others, wrong))))
    elif dimension_key == "spatial_relation":
        for a, b in ((a, b) for i, a in enumerate(once) for b in once[i + 1:]):
            where = relation(next(t for t in things if t.label == a), next(t for t in things if t.label == b), 0.0)
            if where is not None:
                found.append(Candidate((a, b), where, tuple(d for d in DIRECTIONS if d != where)[:wrong]))
    elif dimension_key == "text_understanding":
        lines = [" ".join(f.text.split()) for f in text_reads(facts) if f.text.strip()]
        reads = [normalise_text(line) for line in lines]
        unread = [w for w in dict.fromkeys(words) if not _read(normalise_text(w), reads)]
        for line in dict.fromkeys(lines):
            if len(unread) >= wrong:
                found.append(Candidate((), line, tuple(rng.sample(unread, wrong))))
    return rng.sample(found, most) if len(found) > most else found


def key_by_candidates(question: Question, found: Sequence[Candidate]) -> int | None:
    """The option that is the key by the candidates the prompt held: of those whose four answers are the
    question's options and whose objects the question names, in their order, the index of the true
    answer when they agree on it; None when no candidate fits (the model's own letter then stands)."""
    options = [_norm(o) for o in question.options]
    subjects = [label for c in found for label in c.subject]
    keys = {options.index(_norm(c.true)) for c in found
            if sorted(options) == sorted(_norm(v) for v in (c.true, *c.false))
            and (not c.subject or _named(question.text, subjects) == list(c.subject))}
    return keys.pop() if len(keys) == 1 else None
