"""Questions whose answers follow exactly from labels, boxes, attributes and OCR: no LLM involved.

One pure function per dimension turns an image's object and OCR facts into questions. Each question
names only objects its description picks out uniquely, keeps the correct option first (the quality
gate shuffles the letters later), and records in `meta` what it is about, so a checker can recompute
the answer from ground truth without this code:

- `template`: which question form;
- `target` / `other`: the attributes (with `label`) that pick out the object(s) asked about;
- `attribute`: the attribute asked for; `filter`: what was counted.

Distractors are plausible, never also correct, and chosen so that the options alone do not give the
key away to a model that cannot see the image:
- counts: the four numbers are the key and three others drawn uniformly from the counts this collection
  asks about (its `support`), and a count is asked about only as often as the rarest of them, so each
  number is the key about a quarter of the times it is shown and its rank among the four is uniform.
  Only counts the truth settles exactly are tallied: on real photos most 2s and 3s are dropped for doubt,
  and tallying them would leave the kept keys leaning to 0 and 1. Something absent is counted too, so 0
  is a key as often as a distractor; the absent label is drawn so that each label is absent in as many
  questions, for its present ones, as any other, and the label named does not tell whether the key is 0.
  A count outside the support, or one already asked about enough, is dropped with the reason in
  `meta["dropped"]`, which the quality gate records as a verdict;
- relations: left/right and above/below are asked about equally often across the collection, the same way,
  and only about pairs level (or plumb) enough that one relation alone is true;
- regions: three other grid cells drawn uniformly, so the key is not the cell the others surround;
- identity: two labels crossed with two colours, one pair in the image and three absent, so every
  option shares one attribute with two others and the key is not the one most like the rest;
- text: other real words and strings seen in the collection, of a similar length, never misspellings.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

from pydantic import Field

from benchsmith.dimensions import Dimension
from benchsmith.records import Fact, Image, Provenance, Question, normalise_text, stable_hash
from benchsmith.settings import UNKEYED, Strict, keyed, parse_yaml
from extractors.context import text_reads

BACKEND = "programmatic"
VERSION = "programmatic-v6"  # v6: nothing asked that the boxes or the captions cannot settle exactly
VOCABULARY_FILE = Path(__file__).with_name("vocabulary.yaml")
DESCRIBING = ("size", "colour")  # attributes that may qualify a label, in the order they are spoken


class ProgrammaticSettings(Strict):
    per_dimension: int = Field(3, ge=1)          # at most this many questions per item and dimension
    grid_margin: float = Field(0.04, ge=0)       # a centre this close to a grid line has no clear region
    spatial_gap: float = Field(0.02, ge=0)       # boxes must be this far apart for left/right/above/below
    min_word_length: int = Field(3, ge=1)        # shorter OCR text is not asked about
    min_ocr_score: float = Field(0.5, ge=0, le=1)
    # What real boxes cannot settle exactly (see `doubts`); an object fact with attributes {"crowd": "true"}
    # is a crowd region: its class is never counted and never the one object of its label.
    min_pixels: int = Field(1024, ge=0)          # smaller objects (32x32 px) are not counted, placed or the key
    border: float = Field(0.01, ge=0)            # a box this close to an edge is cut by the border: not counted
    touching: float = Field(0.005, ge=0)         # same-label boxes this close are not counted (one may hide another)
    region_share: float = Field(0.6, gt=0, le=1)  # a location only when this share of the box is in one grid cell
    region_spill: float = Field(0.15, ge=0, le=1)  # a cell holding this share of the box is never a wrong region
    # "How many objects?" only when every object in every image is labelled (drawn scenes); a count under a
    # group noun the vocabulary declares ("shapes") is asked either way
    labels_exhaustive: bool = False
    high_ocr_score: float = Field(0.9, ge=0, le=1)  # an OCR read this confident holds up alone if it is a word
    vocabulary: Path | None = Field(None, json_schema_extra=UNKEYED)  # None: generators/vocabulary.yaml


@dataclass(frozen=True)
class Vocabulary:
    attributes: dict[str, tuple[str, ...]]
    labels: tuple[str, ...]
    plurals: dict[str, str]
    words: tuple[str, ...]
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # plural noun -> the labels it names
    observed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # attribute values seen in the collection
    # family ("count:label", "spatial", ...) -> answer value -> how many questions of that family could
    # have it as their key over the collection (`key_tallies`)
    keys: dict[str, dict[str, int]] = field(default_factory=dict)
    synonyms: dict[str, tuple[str, ...]] = field(default_factory=dict)  # label -> other nouns captions use for it
    names: dict[str, str] = field(default_factory=dict)  # label -> how a question writes it ("tv": "TV")
    absent_weights: dict[str, float] = field(default_factory=dict)  # label -> its weight as the absent one counted

    def widened(self, facts: list[Fact], settings: ProgrammaticSettings | None = None) -> Vocabulary:
        """Attribute values from `facts` added to this vocabulary's; labels and words from `facts`
        replace this vocabulary's when there are enough of them, so distractors come from the
        collection's own label set rather than from unrelated generic ones. The keys the collection
        could give each balanced template are tallied too (`key_tallies`)."""
        attributes = {k: list(v) for k, v in self.attributes.items()}
        objects = [f for f in facts if f.kind == "object"]
        for fact in objects:
            for key, value in fact.attributes.items():
                if key != "crowd":
                    attributes.setdefault(key, []).append(value.lower())
        objects = [f for f in objects if f.attributes.get("crowd") != "true"]
        labels = _unique(f.text.lower() for f in objects)
        words = _unique(f.text for item_facts in _per_item(facts).values()
                        for f in readings(item_facts, settings or ProgrammaticSettings()))
        observed = {k: _unique(v[len(self.attributes.get(k, ())):]) for k, v in attributes.items()}
        wide = Vocabulary({k: _unique(v) for k, v in attributes.items()},
                          _unique(labels if len(labels) >= 4 else [*labels, *self.labels]), self.plurals,
                          _unique(words if len(words) >= 8 else [*words, *self.words]), self.groups, observed,
                          synonyms=self.synonyms, names=self.names)
        settings = settings or ProgrammaticSettings()
        wide = replace(wide, absent_weights=absent_weights(facts, wide, settings))
        return replace(wide, keys=key_tallies(facts, wide, settings))

    def noun(self, things: list[Thing]) -> str:
        """What a count over every object calls them: the group all of their labels belong to
        ("shapes"), else "objects"."""
        labels = {t.label for t in things}
        return next((noun for noun, members in sorted(self.groups.items()) if labels <= set(members)), "objects")

    def values(self, attribute: str) -> tuple[str, ...]:
        """The values of `attribute` seen in the collection when there are enough of them, else every
        known one: a distractor drawn from rarer values than the key's would give the key away."""
        seen = self.observed.get(attribute, ())
        return seen if len(seen) >= 4 else self.attributes.get(attribute, ())

    def support(self, family: str) -> tuple[str, ...]:
        """The key values a balanced family asks about: the most frequent ones, as many as make the
        most questions when each is asked only as often as the rarest of them (at least four, so
        there are three distractors). Without tallies (a vocabulary not widened over a collection),
        the fallback in `FALLBACK_SUPPORT`."""
        tally = self.keys.get(family)
        if not tally:
            return FALLBACK_SUPPORT.get(family.split(":")[0], ())
        ranked = sorted(tally, key=lambda v: (-tally[v], v))
        best = max(range(4, len(ranked) + 1), key=lambda k: (k * tally[ranked[k - 1]], k), default=0)
        return tuple(sorted(ranked[:best], key=_value_order))

    def keep_chance(self, family: str, value: str) -> float:
        """How likely a question of `family` whose key is `value` is kept: the rarest supported key's
        tally over this key's, so across the collection every supported key is asked equally often."""
        support = self.support(family)
        if value not in support:
            return 0.0
        tally = self.keys.get(family)
        return min(tally[v] for v in support) / tally[value] if tally else 1.0


FALLBACK_SUPPORT = {"count": tuple(str(n) for n in range(6)), "spatial": ("above", "below", "left", "right")}


def _value_order(value: str):
    return (0, int(value), "") if value.isdigit() else (1, 0, value)


def _unique(values) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for value in values:
        value = " ".join(str(value).split())
        if value:
            seen.setdefault(value.casefold(), value)
    return tuple(sorted(seen.values()))


@lru_cache(maxsize=4)
def load_vocabulary(path: Path | None = None) -> Vocabulary:
    data = parse_yaml((path or VOCABULARY_FILE).read_text(encoding="utf-8"))
    return Vocabulary({k: tuple(v) for k, v in data.get("attributes", {}).items()}, tuple(data.get("labels", ())),
                      dict(data.get("plurals", {})), tuple(data.get("words", ())),
                      {k: tuple(v) for k, v in data.get("groups", {}).items()},
                      synonyms={k: tuple(v) for k, v in data.get("synonyms", {}).items()},
                      names=dict(data.get("names", {})))


@dataclass(frozen=True)
class Thing:
    """One object fact, reduced to what the templates need."""

    label: str
    box: tuple[float, float, float, float]
    attributes: dict[str, str]
    crowd: bool = False  # a region holding many instances of its label, none of them boxed
    size: tuple[int, int] = (640, 480)  # the image's, in pixels

    @property
    def pixels(self) -> float:
        return (self.box[2] - self.box[0]) * (self.box[3] - self.box[1]) * self.size[0] * self.size[1]

    def describe(self) -> dict[str, str]:
        return {"label": self.label} | {k: self.attributes[k] for k in DESCRIBING if k in self.attributes}

    @property
    def centre(self) -> tuple[float, float]:
        return (self.box[0] + self.box[2]) / 2, (self.box[1] + self.box[3]) / 2


def things_in(facts: list[Fact], size: tuple[int, int] = (640, 480)) -> list[Thing]:
    """The objects, each once: an extractor's facts stay when its parameters change (the supplied
    annotations once more, say), and the same label, box and attributes twice are one object."""
    things = [Thing(" ".join(f.text.split()).lower(), f.box,
                    {k: v.lower() for k, v in f.attributes.items() if k != "crowd"},
                    f.attributes.get("crowd", "").lower() == "true", size)
              for f in facts if f.kind == "object" and f.box is not None and f.text.strip()]
    return list({(t.label, t.box, t.crowd, tuple(sorted(t.attributes.items()))): t for t in things}.values())


def _apart(a: Thing, b: Thing, gap: float) -> bool:
    return (a.box[2] + gap <= b.box[0] or b.box[2] + gap <= a.box[0]
            or a.box[3] + gap <= b.box[1] or b.box[3] + gap <= a.box[1])


def doubt(thing: Thing, things: list[Thing], settings: ProgrammaticSettings) -> str:
    """Why `thing`'s boxes cannot settle exactly how many there are of its label, or "": a crowd region,
    one too small to be sure of (labels miss such), one cut by the border, or two of them touching."""
    same = [t for t in things if t.label == thing.label]
    if any(t.crowd for t in same):
        return f"a crowd region holds an uncounted number of {thing.label}"
    if any(t.pixels < settings.min_pixels for t in same):
        return f"a {thing.label} covers under {settings.min_pixels} pixels: too small to be sure of"
    if any(min(t.box[0], t.box[1], 1 - t.box[2], 1 - t.box[3]) < settings.border for t in same):
        return f"a {thing.label} is cut by the image border"
    if any(not _apart(a, b, settings.touching) for a, b in itertools.combinations(same, 2)):
        return f"two {thing.label} boxes touch or overlap: one may hide another"
    return ""


# -- Captions: what they say about the labels ----------------------------------------------------------

NUMBER_WORDS = {"no": 0, "one": 1, "two": 2, "both": 2, "pair": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
MANY_WORDS = {"several", "many", "some", "group", "groups", "bunch", "herd", "flock", "crowd", "lots", "lot", "few",
              "couple", "multiple", "various", "numerous", "pile", "piles", "stack", "stacks", "row", "rows",
              "line", "lines", "full", "assortment", "variety", "plenty", "bunches", "dozens", "dozen", "team"}
PHRASE_BREAKS = {"and", "with", "on", "in", "at", "by", "near", "while", "beside", "from", "to", "for", "under",
                 "over", "is", "are", "has", "have", "next", "behind", "into", "onto", "as", "that", "who"}


def _words(caption: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", caption.lower())


def mentions(captions: list[str], label: str, vocabulary: Vocabulary) -> list[tuple[int | str | None, bool]]:
    """Each place a caption names `label` (or one of its synonyms): the number said before it (an int,
    "many" for a vague quantity, None for none) and whether the noun is plural."""
    forms: dict[tuple[str, ...], bool] = {}
    for name in (label, *vocabulary.synonyms.get(label, ())):
        forms.setdefault(tuple(name.lower().split()), False)
        forms.setdefault(tuple(plural(name, vocabulary).lower().split()), True)
    found = []
    for caption in captions:
        words = _words(caption)
        for i in range(len(words)):
            for form, many in forms.items():
                if tuple(words[i:i + len(form)]) != form:
                    continue
                said = None
                for word in reversed(words[max(0, i - 3):i]):
                    if word in PHRASE_BREAKS:
                        break
                    if word in NUMBER_WORDS or word.isdigit():
                        said = NUMBER_WORDS.get(word, int(word) if word.isdigit() else None)
                        break
                    if word in MANY_WORDS:
                        said = "many"
                        break
                found.append((said, many))
    return found


def caption_conflict(captions: list[str], label: str, n: int, vocabulary: Vocabulary) -> str:
    """Why the captions do not agree that there are exactly `n` of `label`, or ""."""
    for said, many in mentions(captions, label, vocabulary):
        if said == "many":
            return f"a caption speaks of an uncounted number of {label}"
        if isinstance(said, int) and said != n:
            return f"a caption says {said} {label} where the boxes give {n}"
        if n == 0 or (many and said is None and n < 2):
            return f"a caption mentions {label} where the boxes give {n}"
    return ""


def captions_of(facts: list[Fact]) -> list[str]:
    return [f.text for f in facts if f.kind == "caption"]


def _matches(thing: Thing, target: dict[str, str]) -> bool:
    return all((thing.label if key == "label" else thing.attributes.get(key)) == value for key, value in target.items())


def referent(thing: Thing, things: list[Thing], *, without: str | None = None) -> dict[str, str] | None:
    """The fewest describing attributes (plus the label) that pick out `thing` alone, or None.

    `without` names an attribute the description must not use (the one being asked about); when the
    label is that attribute too (a shape's label is its shape), the label is left out as well.
    """
    full = thing.describe()
    drop_label = without is not None and thing.attributes.get(without) == thing.label
    usable = [k for k in DESCRIBING if k in full and k != without]
    base = {} if drop_label else {"label": thing.label}
    for size in range(len(usable) + 1):
        for keys in itertools.combinations(usable, size):
            target = base | {k: full[k] for k in keys}
            if target and sum(_matches(t, target) for t in things) == 1:
                return target
    return None


def phrase(target: dict[str, str], vocabulary: Vocabulary | None = None) -> str:
    """'the large red circle'; an unlabelled target is an 'object'; a label as the vocabulary writes it ('TV')."""
    words = [target[k] for k in DESCRIBING if k in target]
    label = target.get("label", "object")
    return "the " + " ".join([*words, vocabulary.names.get(label, label) if vocabulary else label])


def plural(label: str, vocabulary: Vocabulary) -> str:
    """The plural a question uses for `label`: the vocabulary's table first (for what the inflection
    library gets wrong), then `inflect`; a label that is already plural ('scissors', 'stairs') stays."""
    if label in vocabulary.plurals:
        return vocabulary.plurals[label]
    engine = _inflection()
    head, _, last = label.rpartition(" ")
    singular = engine.singular_noun(last)
    if singular and engine.plural_noun(singular) == last:
        return label
    return f"{head} {engine.plural_noun(last)}".strip()


def is_plural(label: str, vocabulary: Vocabulary) -> bool:
    """Whether `label` names several things already ('skis', 'scissors'): its verb is 'are'."""
    last = label.rpartition(" ")[2]
    return plural(label, vocabulary) == label and (_inflection().singular_noun(last) not in (False, last)
                                                   or last.endswith("s") and not last.endswith("ss"))


def be(target: dict[str, str], vocabulary: Vocabulary) -> str:
    return "are" if is_plural(target.get("label", "object"), vocabulary) else "is"


@lru_cache(maxsize=1)
def _inflection():
    import_inflect_unchecked()
    import inflect
    return inflect.engine()


def import_inflect_unchecked() -> None:
    """Import `inflect` with typeguard's `@typechecked` as a no-op, as under `python -O`: instrumenting
    inflect's engine parses its whole source again once per method, about 1.5 s of CPU in every `generate`.
    Its answers are the same; only its own run-time checks of argument types are gone."""
    import sys

    if "inflect" in sys.modules:
        return
    import typeguard

    checked = typeguard.typechecked
    typeguard.typechecked = lambda target=None, **_options: target if target is not None else (lambda t: t)
    try:
        import inflect  # noqa: F401
    finally:
        typeguard.typechecked = checked


@dataclass(frozen=True)
class Draft:
    """A question before it becomes a record: the correct option comes first."""

    text: str
    options: tuple[str, str, str, str]
    meta: dict
    dropped: str = ""  # why this question is not asked (kept as a dropped question with this reason)
    rule: str = "unbalanced_key"  # the quality gate's rule it is dropped under


Template = Callable[[list[Thing], list[Fact], Vocabulary, ProgrammaticSettings, random.Random], list[Draft]]


def pick(pool, n: int, avoid) -> list:
    """n distinct members of `pool` (in pool order preference, ties shuffled) not in `avoid`."""
    avoid_keys = {normalise_text(str(a)) for a in avoid}
    out: list = []
    for value in pool:
        key = normalise_text(str(value))
        if key not in avoid_keys:
            avoid_keys.add(key)
            out.append(value)
        if len(out) == n:
            break
    return out


def shuffled(rng: random.Random, values) -> list:
    values = sorted(values, key=repr)  # sets iterate in a per-process order; sort for reproducibility
    rng.shuffle(values)
    return values


def four_options(rng: random.Random, key: str, others) -> tuple[str, str, str, str] | None:
    """The key and three of `others` drawn at random (none equal to it or to each other), or None."""
    picked = pick(shuffled(rng, others), 3, avoid=[key])
    return (key, *picked) if len(picked) == 3 else None


def drafts_of(rng: random.Random, template: str, asks: list[tuple[str, str, Iterable, dict]]) -> list[Draft]:
    """Drafts of `template` from the asks (question, key, the pool of options, meta) whose pool holds three
    distractors (`four_options`), in order."""
    return [Draft(text, options, {"template": template} | meta) for text, key, pool, meta in asks
            if (options := four_options(rng, key, pool))]


# -- Instances Counting -----------------------------------------------------------------------------

def count_groups(things: list[Thing], vocabulary: Vocabulary, rng: random.Random,
                 text: bool = False, exhaustive: bool = False) -> dict[tuple[str, str], int]:
    """What can be counted in an image and how many there are: every object, each label and each colour,
    plus one label and one colour that are absent (count 0), so that 0 is a key as well as a distractor.
    Every object is counted under the name of the group they all belong to ("shapes"); with no group, only
    when the labels are `exhaustive` and no `text` is in the image ("objects" would count the signs the
    text is on too, and whatever was left unlabelled)."""
    noun = vocabulary.noun(things)
    groups: Counter = (Counter() if noun == "objects" and (text or not exhaustive)
                       else Counter({("all", noun): len(things)}))
    for thing in things:
        groups[("label", thing.label)] += 1
        if "colour" in thing.attributes:
            groups[("colour", thing.attributes["colour"])] += 1
    for key, values in (("label", vocabulary.labels), ("colour", vocabulary.values("colour"))):
        absent = [v for v in values if (key, v) not in groups]
        weights = [vocabulary.absent_weights.get(v, 1.0) if key == "label" else 1.0 for v in absent]
        if absent and sum(weights) > 0:
            groups[(key, rng.choices(absent, weights)[0])] = 0
    return dict(groups)


def count_options(true: int, support: tuple[str, ...], rng: random.Random, unfit=()) -> list[int] | None:
    """Four distinct counts, `true` first, the others drawn uniformly from the supported counts but not
    from `unfit` (counts a viewer could also defend): the four are then a uniform draw of the support
    whichever of them is the key. None when fewer than three are left."""
    others = [int(v) for v in support if int(v) != true and int(v) not in unfit]
    return [true, *rng.sample(others, 3)] if len(others) >= 3 else None


def _has_text(facts: list[Fact]) -> bool:
    return any(f.kind == "ocr" and f.text.strip() for f in facts)


def counting(things, facts, vocabulary, settings, rng) -> list[Draft]:
    if not things:
        return []
    drafts, noun, captions = [], vocabulary.noun(things), captions_of(facts)
    # the signs on a drawn scene are boards a viewer might count as shapes too: never offer those counts
    signs = len(text_reads(f for f in facts if f.kind == "ocr" and f.text.strip()))
    groups = count_groups(things, vocabulary, rng, _has_text(facts), settings.labels_exhaustive)
    for (key, value), n in sorted(groups.items()):
        family = f"count:{key}"
        what = value if key == "all" else plural(value, vocabulary) if key == "label" else f"{value} {noun}"
        text = f"How many {what} are there in the image?"
        meta = {"template": "count", "filter": {} if key == "all" else {key: value}}
        support = vocabulary.support(family)
        if len(support) < 4:
            continue
        unfit = range(n + 1, n + signs + 1) if key == "all" else ()
        unsure = count_doubt(key, value, n, things, captions, vocabulary, settings)
        if (options := count_options(n, support, rng, unfit)) is None:
            continue
        draft = Draft(text, tuple(str(v) for v in options), meta)
        if unsure:
            drafts.append(replace(draft, dropped=unsure, rule="inexact_truth"))
        elif str(n) not in support:
            drafts.append(replace(draft, dropped=f"count {n} is outside the counts asked about "
                                                 f"({', '.join(support)}): the options would give it away"))
        else:
            drafts.append(_balanced(draft, family, str(n), vocabulary, rng))
    return drafts


def count_doubt(key: str, value: str, n: int, things: list[Thing], captions: list[str], vocabulary: Vocabulary,
                settings: ProgrammaticSettings) -> str:
    """Why the count of group (`key`, `value`) cannot be settled exactly as `n`, or "" (see `doubt`)."""
    counted = [t for t in things if key == "all" or (t.label if key == "label" else t.attributes.get(key)) == value]
    return next((why for t in counted if (why := doubt(t, things, settings))), "") or (
        caption_conflict(captions, value, n, vocabulary) if key == "label" else "")


def _balanced(draft: Draft, family: str, key: str, vocabulary: Vocabulary, rng: random.Random) -> Draft:
    """`draft`, dropped at random as often as its key is more common in the collection than the rarest
    supported one: keys shown more often than others would be a prior a blind model learns."""
    if rng.random() < vocabulary.keep_chance(family, key):
        return draft
    return replace(draft, dropped=f"the key {key!r} is already asked about more often than other keys of "
                                  f"this template ({family}); asking it again would make it a guessable prior")


def key_tallies(facts: list[Fact], vocabulary: Vocabulary, settings: ProgrammaticSettings) -> dict[str, dict[str, int]]:
    """For the balanced templates, how many questions over the collection could have each key: counts
    per family (every object, per label, per colour, one absent label and colour per image) that the
    truth settles exactly (a count dropped for doubt would otherwise still lower the keep chance of the
    others, and the keys kept would lean towards the counts real boxes settle most often), spatial
    relations between pairs of objects, and the labels an identity question could name (images per label)."""
    tallies: dict[str, Counter] = defaultdict(Counter)
    rng = random.Random(0)
    for item_facts in _per_item(facts).values():
        if not (things := things_in(item_facts)):
            continue
        captions = captions_of(item_facts)
        for (key, value), n in count_groups(things, vocabulary, rng, _has_text(item_facts),
                                            settings.labels_exhaustive).items():
            if not count_doubt(key, value, n, things, captions, vocabulary, settings):
                tallies[f"count:{key}"][str(n)] += 1
        for label in {t.label for t in things}:
            tallies["identity"][label] += 1
        for a, b in itertools.permutations(things, 2):
            if (where := relation(a, b, settings.spatial_gap)) is not None and not (a.crowd or b.crowd):
                tallies["spatial"][where] += 1
    return {family: dict(tally) for family, tally in sorted(tallies.items())}


def absent_weights(facts: list[Fact], vocabulary: Vocabulary, settings: ProgrammaticSettings,
                   rounds: int = 30) -> dict[str, float]:
    """How likely each label is picked as the one absent thing an image counts (key 0), so that over the
    collection each label is the absent one in as many count questions, relative to the exact counts
    asked about it where present, as every other label: the label a question names then does not tell a
    model without the image whether the key is 0 (a label present in most photos is absent from few,
    so it needs a heavier weight there). Fitted by iterative proportional scaling; a label present
    almost everywhere gets what its few absences allow."""
    present: list[set[str]] = []
    exact: Counter = Counter()
    for item_facts in _per_item(facts).values():
        if not (things := things_in(item_facts)):
            continue
        labels = {t.label for t in things}
        present.append(labels)
        captions = captions_of(item_facts)
        exact.update(label for label in labels if not count_doubt(
            "label", label, sum(t.label == label for t in things), things, captions, vocabulary, settings))
    labels = [label for label in vocabulary.labels if exact[label]]
    if not present or not labels:
        return {}
    target = {label: len(present) * exact[label] / sum(exact[v] for v in labels) for label in labels}
    weights = dict.fromkeys(labels, 1.0)
    for _ in range(rounds):
        # exact sums (fsum), so no result hangs on the order a set of labels is walked in: a label in every
        # item has a share of exactly 0, not a rounding error either side of it, in every process
        total = math.fsum(weights.values())
        inverse = [1 / rest if (rest := total - math.fsum(weights.get(v, 0.0) for v in held)) > 0 else 0.0
                   for held in present]
        holding: dict[str, list[float]] = defaultdict(list)
        for held, inv in zip(present, inverse):
            for label in held & weights.keys():
                holding[label].append(inv)
        everywhere = math.fsum(inverse)
        expected_share = {label: everywhere - math.fsum(holding[label]) for label in labels}
        weights = {label: min(1e6, max(1e-6, w * target[label] / (w * expected_share[label])))
                   if expected_share[label] > 0 else w for label, w in weights.items()}
    return {label: weights.get(label, 0.0) for label in vocabulary.labels}


def _per_item(facts: list[Fact]) -> dict[str, list[Fact]]:
    """Each item's facts, items in id order: sums over the collection (`absent_weights`) then come out the
    same bit for bit however the store happened to list them (a sharded build writes in another order)."""
    per_item: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        per_item[fact.item_id].append(fact)
    return dict(sorted(per_item.items()))


# -- Instance Location ------------------------------------------------------------------------------

ROWS = ("top", "middle", "bottom")
COLUMNS = ("left", "centre", "right")


def region_name(row: int, column: int) -> str:
    return "centre" if row == 1 and column == 1 else f"{ROWS[row]} {COLUMNS[column]}"


def grid_cell(value: float, margin: float) -> int | None:
    """Which third `value` falls in, or None when it is within `margin` of a dividing line."""
    if any(abs(value - line) < margin for line in (1 / 3, 2 / 3)):
        return None
    return min(int(value * 3), 2)


def cell_share(box: tuple[float, float, float, float], row: int, column: int) -> float:
    """The share of `box`'s area that lies in grid cell (row, column)."""
    x1, y1, x2, y2 = box
    width = max(0.0, min(x2, (column + 1) / 3) - max(x1, column / 3))
    height = max(0.0, min(y2, (row + 1) / 3) - max(y1, row / 3))
    area = (x2 - x1) * (y2 - y1)
    return width * height / area if area > 0 else 0.0


def location(things, _facts, vocabulary, settings, rng) -> list[Draft]:
    drafts = []
    for thing in things:
        target = referent(thing, things)
        column, row = (grid_cell(v, settings.grid_margin) for v in thing.centre)
        if target is None or row is None or column is None or thing.crowd:
            continue
        # nor a cell holding a fair share of the box: a viewer could defend it
        cells = [(r, c) for r in range(3) for c in range(3)
                 if (r, c) != (row, column) and cell_share(thing.box, r, c) < settings.region_spill]
        # uniformly drawn, not the neighbours: neighbouring distractors surround the key and give it away
        if len(cells) < 3:
            continue
        chosen = rng.sample(cells, 3)
        options = (region_name(row, column), *(region_name(*cell) for cell in chosen))
        draft = Draft(f"In which part of the image {be(target, vocabulary)} {phrase(target, vocabulary)}?", options,
                      {"template": "location", "target": target})
        share = cell_share(thing.box, row, column)
        if thing.pixels < settings.min_pixels:
            draft = replace(draft, dropped=f"it covers under {settings.min_pixels} pixels", rule="inexact_truth")
        elif share < settings.region_share:
            draft = replace(draft, dropped=f"only {share:.0%} of its box lies in the {options[0]} region: it straddles "
                                           f"or fills several", rule="inexact_truth")
        drafts.append(draft)
    return drafts


# -- Spatial Relation -------------------------------------------------------------------------------

RELATIONS = {"left": "to its left", "right": "to its right", "above": "above it", "below": "below it"}


def relation(a: Thing, b: Thing, gap: float) -> str | None:
    """Where a is relative to b, when the boxes are apart along one axis and, along the other, each
    box's centre lies within the other box: a pair that only overlaps at its edges there is diagonal
    ("to its right" and "below it" would both be right), so it is not asked about."""
    horizontal = "left" if a.box[2] + gap <= b.box[0] else "right" if b.box[2] + gap <= a.box[0] else None
    vertical = "above" if a.box[3] + gap <= b.box[1] else "below" if b.box[3] + gap <= a.box[1] else None
    (ax, ay), (bx, by) = a.centre, b.centre
    level = b.box[1] <= ay <= b.box[3] and a.box[1] <= by <= a.box[3]
    plumb = b.box[0] <= ax <= b.box[2] and a.box[0] <= bx <= a.box[2]
    if horizontal and level:
        return horizontal
    if vertical and plumb:
        return vertical
    return None


def spatial(things, _facts, vocabulary, settings, rng) -> list[Draft]:
    drafts = []
    for a, b in itertools.permutations(things, 2):
        where = relation(a, b, settings.spatial_gap)
        target, other = referent(a, things), referent(b, things)
        if where is None or target is None or other is None or a.crowd or b.crowd:
            continue
        options = (RELATIONS[where], *(text for name, text in RELATIONS.items() if name != where))
        question = f"Where {be(target, vocabulary)} {phrase(target, vocabulary)} relative to {phrase(other, vocabulary)}?"
        if min(a.pixels, b.pixels) < settings.min_pixels:
            drafts.append(Draft(question, options, {"template": "spatial", "target": target, "other": other},
                                dropped=f"an object covers under {settings.min_pixels} pixels",
                                rule="inexact_truth"))
            continue
        drafts.append(_balanced(Draft(question, options,
                                      {"template": "spatial", "target": target, "other": other}),
                                "spatial", where, vocabulary, rng))
    return drafts


# -- Instance Attributes ----------------------------------------------------------------------------

ATTRIBUTE_QUESTIONS = {"colour": "What colour is {}?", "shape": "What shape is {}?",  # 'is' becomes 'are' for 'skis'

                       "size": "How large is {} compared with the other objects?"}


def attributes(things, _facts, vocabulary, _settings, rng) -> list[Draft]:
    drafts = []
    for thing in things:
        for key in ("colour", "shape", "size"):
            value = thing.attributes.get(key)
            values = vocabulary.values(key)
            if value is None or len(values) < 4:
                continue
            if (target := referent(thing, things, without=key)) is None:
                continue
            # values seen on other objects in the same image are the hardest distractors
            present = shuffled(rng, {t.attributes.get(key) for t in things} - {value, None})
            pool = present[:2] + shuffled(rng, [v for v in values if v not in present])
            others = pick(pool, 3, avoid=[value])
            if len(others) < 3:
                continue
            question = ATTRIBUTE_QUESTIONS[key].format(phrase(target, vocabulary))
            if be(target, vocabulary) == "are":
                question = question.replace(" is ", " are ", 1)
            drafts.append(Draft(question, (value, *others),
                                {"template": "attribute", "attribute": key, "target": target}))
    return drafts


# -- Instance Identity ------------------------------------------------------------------------------

def _name(label: str, colour: str | None, vocabulary: Vocabulary) -> str:
    label = vocabulary.names.get(label, label)
    return f"{colour} {label}" if colour else label


def identity(things, facts, vocabulary, settings, rng) -> list[Draft]:
    """With colours: the present (label, colour) crossed with another label and another colour, the
    three other pairs all absent from the image. Without: four labels of the collection's commoner ones
    (`Vocabulary.support`), three of them absent, each label the key equally often. A label shown only too
    small to see is not the key; one a caption names is never a wrong option."""
    captions = captions_of(facts)
    seen = {(t.label, t.attributes.get("colour")) for t in things}
    present = {(t.label, t.attributes.get("colour")) for t in things if t.crowd or t.pixels >= settings.min_pixels}
    present_labels = {t.label for t in things} | {l for l in vocabulary.labels if mentions(captions, l, vocabulary)}
    colours = vocabulary.values("colour")
    support = vocabulary.support("identity")
    drafts = []
    for label, colour in sorted(present, key=lambda p: (p[0], p[1] or "")):
        if colour:
            crossings = [(other_label, other_colour)
                         for other_label in shuffled(rng, [l for l in vocabulary.labels if l not in present_labels])
                         for other_colour in shuffled(rng, [c for c in colours if c != colour])
                         if not {(label, other_colour), (other_label, colour), (other_label, other_colour)} & seen]
            if not crossings:
                continue
            other_label, other_colour = rng.choice(crossings[:20])
            others = [_name(label, other_colour, vocabulary), _name(other_label, colour, vocabulary),
                      _name(other_label, other_colour, vocabulary)]
        else:
            # labels as keys as often as each other (`_balanced`), the wrong ones drawn uniformly from the same
            # labels: then no label is the key more than a quarter of the times it is shown
            others = pick(shuffled(rng, [vocabulary.names.get(l, l) for l in support or vocabulary.labels
                                         if l not in present_labels]), 3, avoid=[label])
        if len(others) < 3:
            continue
        draft = Draft("Which of these can be seen in the image?", (_name(label, colour, vocabulary), *others),
                      {"template": "identity", "target": {"label": label} | ({"colour": colour} if colour else {})})
        if not colour and vocabulary.keys.get("identity"):
            draft = (_balanced(draft, "identity", label, vocabulary, rng) if label in support else
                     replace(draft, dropped=f"{label!r} is rarer in the collection than the labels asked about: "
                                            "as a key among them it would stand out"))
        drafts.append(draft)
    return drafts


# -- Text Understanding -----------------------------------------------------------------------------

WELL_FORMED = re.compile(r"[A-Z][a-z]{2,}|[A-Z]{3,}|[a-z]{3,}|\d{1,6}([.,:/-]\d{1,4})*")


def holds_up(read: Fact, facts: list[Fact], settings: ProgrammaticSettings) -> bool:
    """Whether an OCR read can be the key of a text question on a photo with no text truth: supplied
    text; a read another reader (or a second pass) agrees with letter for letter; or a confident read
    that is one well-formed word, name or number (not debris such as 'mm mer mee')."""
    if read.provenance.backend == "supplied":
        return True
    if read.score is not None and read.score < settings.min_ocr_score:
        return False
    plain = re.sub(r"[\W_]+", "", normalise_text(read.text))
    if any(other is not read and other.kind == "ocr" and other.provenance != read.provenance
           and re.sub(r"[\W_]+", "", normalise_text(other.text)) == plain and text_reads([read, other]) != [read, other]
           for other in facts):
        return True
    return (read.score or 0.0) >= settings.high_ocr_score and WELL_FORMED.fullmatch(read.text.strip()) is not None


def readings(facts: list[Fact], settings: ProgrammaticSettings) -> list[Fact]:
    """An image's text reads that hold up (`holds_up`), each piece of text once (`text_reads`)."""
    ocr = [f for f in facts if f.kind == "ocr" and f.text.strip()]
    return [f for f in text_reads(ocr) if holds_up(f, ocr, settings)
            and len(" ".join(f.text.split())) >= settings.min_word_length]


def text(_things, facts, vocabulary, settings, rng) -> list[Draft]:
    """Which text is in the image, about reads that hold up (`readings`); the distractors are words of the
    vocabulary and reads that hold up on other images, of a similar length, in the key's case. A line read
    twice (supplied and by an OCR model) is asked about once, as supplied (`text_reads`). The meta keeps
    the box the text was read from, for review."""
    reads = readings(facts, settings)
    lines = {" ".join(f.text.split()): f for f in reads}
    present = {normalise_text(line) for line in lines}
    if not lines:
        return []
    question = ("What does the text in the image say?" if len(lines) == 1
                else "Which of these words is written in the image?")
    drafts = []
    for line, read in lines.items():
        same_case = [w for w in dict.fromkeys(_in_case_of(line, w) for w in vocabulary.words)
                     if normalise_text(w) not in present]
        # the nearest lengths, ties broken at random: neither the shortest nor the longest gives the key away
        pool = sorted(shuffled(rng, same_case), key=lambda w: abs(len(w) - len(line)))[:8]
        others = pick(shuffled(rng, pool), 3, avoid=[line, *lines])
        if len(others) < 3:
            continue
        crop = [round(v, 4) for v in _quad_box(read.quad)]
        drafts.append(Draft(question, (line, *others), {"template": "text", "target": {"text": line}, "crop": crop}))
    return drafts


def _in_case_of(line: str, word: str) -> str:
    """`word` written in the case `line` is: an all-capitals key gets all-capitals distractors, and so on."""
    return word.upper() if line.isupper() else word.lower() if line.islower() else \
        word.capitalize() if line[:1].isupper() else word


def _quad_box(quad) -> tuple[float, float, float, float]:
    xs, ys = zip(*quad)
    return (min(xs), min(ys), max(xs), max(ys))


TEMPLATES: dict[str, Template] = {
    "instances_counting": counting,
    "instance_location": location,
    "spatial_relation": spatial,
    "instance_attributes": attributes,
    "instance_identity": identity,
    "text_understanding": text,
}


def generate(item: Image, facts: list[Fact], dimension: Dimension, vocabulary: Vocabulary,
             settings: ProgrammaticSettings, seed: int = 0) -> list[Question]:
    """Up to `settings.per_dimension` questions about `item`; the correct option is first. Drafts met on
    the way that are not asked come too, with the reason in `meta["dropped"]` (the quality gate keeps
    them as dropped questions)."""
    rng = random.Random(stable_hash(seed, item.id, dimension.id))
    drafts = TEMPLATES[dimension.key](things_in(facts, (item.width, item.height)), facts, vocabulary, settings, rng)
    return questions_from(drafts, item, dimension, settings, rng, seed)


def questions_from(drafts: list[Draft], item: Image, dimension: Dimension, settings, rng: random.Random, seed: int,
                   backend: str = BACKEND, version: str = VERSION) -> list[Question]:
    """Up to `settings.per_dimension` of `drafts`, drawn at random, as questions of `backend` at `version`; the
    drafts not asked (`dropped`) that the draw met on the way come too."""
    provenance = Provenance(backend=backend, prompt_version=version, seed=seed, params=keyed(settings))
    chosen, asked = [], 0
    for draft in rng.sample(drafts, len(drafts)):
        if asked == settings.per_dimension:
            break
        chosen.append(draft)
        asked += not draft.dropped
    return [Question(item_id=item.id, dimension_id=dimension.id, text=d.text, options=list(d.options), answer=0,
                     provenance=provenance, meta=d.meta | {"generator": backend}
                     | ({"dropped": d.dropped, "drop_rule": d.rule} if d.dropped else {})) for d in chosen]
