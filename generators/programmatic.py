"""Questions whose answers follow exactly from labels, boxes, attributes and OCR: no LLM involved.

One pure function per dimension turns an image's object and OCR facts into questions. Each question
names only objects its description picks out uniquely, keeps the correct option first (the quality
gate shuffles the letters later), and records in `meta` what it is about, so a checker can recompute
the answer from ground truth without this code:

- `template`: which question form;
- `target` / `other`: the attributes (with `label`) that pick out the object(s) asked about;
- `attribute`: the attribute asked for; `filter`: what was counted.

Distractors are plausible, never also correct, and chosen so that the options alone do not give the
key away to a model that cannot see the image. For counts, relations, regions and labels the three wrong
options are drawn with chance proportional to the product of how often each value is a key in the
collection (`Vocabulary.draw`), and a question is kept with a chance per key (`keep_chances`) that makes
every value the key of a quarter of the questions that show it: given the four values shown, each is
about equally likely to be the key, however unevenly the collection's keys fall (on real photos most
settled counts are 0 or 1, most relations left or right, most labels "person"). A question dropped for
that is kept as dropped with the reason in `meta["dropped"]`, which the quality gate records as a verdict.
- counts: only counts the truth settles exactly are tallied (a count dropped for doubt would skew the
  draw). Something absent is counted too, so 0 is a key as well as a distractor; the absent label is drawn
  so that each label is absent in as many questions, for its present ones, as any other, and the label
  named does not tell whether the key is 0. "Which of these is there exactly n of?" asks the same over
  labels: the wrong ones have another settled count, more than n instances of visible size, or none;
- relations: only about pairs level (or plumb) enough that one relation alone is true; "Which of these is
  to the left of the dog?" asks over labels, the wrong ones keeping clear of that side of the dog;
- regions: "Which of these is in the top left of the image?" asks over labels, the wrong ones keeping
  out of that region;
- identity: two labels crossed with two colours, one pair in the image and three absent, so every
  option shares one attribute with two others and the key is not the one most like the rest; without
  colours, the label and three absent ones by the draw;
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
from typing import Callable, Iterable, Mapping, NamedTuple

import numpy as np
from pydantic import Field

from benchsmith.dimensions import Dimension
from benchsmith.records import Fact, Image, Provenance, Question, normalise_text, stable_hash
from benchsmith.settings import UNKEYED, Strict, keyed, parse_yaml
from extractors.context import text_reads

BACKEND = "programmatic"
VERSION = "programmatic-v8"  # v8: keys tallied at each image's own size (v7: keys drawn by how often; the cap)
VOCABULARY_FILE = Path(__file__).with_name("vocabulary.yaml")
DESCRIBING = ("size", "colour")  # attributes that may qualify a label, in the order they are spoken
DEFAULT_SIZE = (640, 480)  # an image's size in pixels where its own is not given


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
    # have it as their key over the collection, each as its share of being drawn (`key_tallies`, `balanced`)
    keys: dict[str, dict[str, float]] = field(default_factory=dict)
    synonyms: dict[str, tuple[str, ...]] = field(default_factory=dict)  # label -> other nouns captions use for it
    names: dict[str, str] = field(default_factory=dict)  # label -> how a question writes it ("tv": "TV")
    absent_weights: dict[str, float] = field(default_factory=dict)  # label -> its weight as the absent one counted
    chances: dict[str, dict[str, float]] = field(default_factory=dict)  # family -> key -> keep chance (`keep_chances`)

    def widened(self, facts: list[Fact], settings: ProgrammaticSettings | None = None,
                sizes: Mapping[str, tuple[int, int]] | None = None) -> Vocabulary:
        """Attribute values from `facts` added to this vocabulary's; labels and words from `facts`
        replace this vocabulary's when there are enough of them, so distractors come from the
        collection's own label set rather than from unrelated generic ones. The keys the collection
        could give each balanced template are tallied too (`key_tallies`), each item at its size in
        `sizes` (item id -> width, height), as `generate` sees it: a box's pixels decide whether it is asked
        about."""
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
        wide = replace(wide, absent_weights=absent_weights(facts, wide, settings, sizes))
        return wide.balanced(key_tallies(facts, wide, settings, sizes), settings.per_dimension)

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

    def weights(self, family: str) -> dict[str, float]:
        """How heavily each key value of `family` is drawn as a wrong option: how many questions over the
        collection could have it as their key, each as its share of being asked (`balanced`), so a common key
        is a common wrong option too. Without tallies (a vocabulary not widened over a collection), evenly:
        `FALLBACK_SUPPORT` for numbers and relations, the labels for the rest."""
        if family not in self.keys:
            return dict.fromkeys(FALLBACK_SUPPORT.get(family.split(":")[0], self.labels), 1.0)
        return {v: float(n) for v, n in sorted(self.keys[family].items()) if n > 0}

    def support(self, family: str) -> tuple[str, ...]:
        """The key values `family` asks about: every one the collection could have as a key."""
        return tuple(sorted(self.weights(family), key=_value_order))

    def keep_chance(self, family: str, value: str) -> float:
        """How likely a question of `family` whose key is `value` is kept (`keep_chances`); without tallies,
        always."""
        if family not in self.chances:
            return 1.0 if value in self.weights(family) else 0.0
        return self.chances[family].get(value, 0.0)

    def balanced(self, asks: Iterable[Ask], cap: int | None = None, rounds: int = 3) -> Vocabulary:
        """This vocabulary with the key tallies and keep chances of `asks`: every question the collection could
        ask of a balanced family (`Ask`). With a `cap`, an item asks at most that many of a group's kept
        questions, drawn at random (`questions_from`), so each counts as its chance of being asked once kept
        (`_asked_shares`): a busy photo, where one label is the usual key, asks a smaller share of its
        questions than a sparse one. The shares follow from the keep chances and the chances from the shares:
        `rounds` passes settle them."""
        asks = [Ask(family, key, None if pool is None else tuple(pool), *group)
                for family, key, pool, *group in asks]
        shares = [1.0] * len(asks)
        for _ in range(rounds if cap else 1):
            keys: dict[str, Counter] = defaultdict(Counter)
            for ask, share in zip(asks, shares):
                keys[ask.family][ask.key] += share
            tallied = replace(self, keys={family: {k: round(n, 6) for k, n in sorted(tally.items())}
                                          for family, tally in sorted(keys.items())})
            chances = keep_chances(asks, tallied, shares)
            if cap:
                shares = _asked_shares(asks, chances, cap)
        return replace(tallied, chances=chances)

    def draw(self, family: str, key: str, pool: Iterable[str], rng: random.Random, n: int = 3) -> list[str] | None:
        """`n` distinct wrong options out of `pool` (never `key`), a set drawn with chance proportional to
        the product of its members' weights (`weights`; a value without one is never drawn), or None when
        fewer than `n` have a weight."""
        weights = self.weights(family)
        candidates = sorted({v for v in pool if v != key and weights.get(v, 0) > 0}, key=_value_order)
        if len(candidates) < n:
            return None
        return _product_sample(candidates, [weights[v] for v in candidates], n, rng)


class Ask(NamedTuple):
    """A question the collection could ask of a balanced family: its key, the values that could be its wrong
    options (None: any of the family's keys), and the group whose questions share the per-item cap (an item
    and dimension; None: uncapped)."""

    family: str
    key: str
    pool: tuple[str, ...] | None = None
    group: tuple[str, str] | None = None


def keep_chances(asks: list[Ask], vocabulary: Vocabulary, shares: list[float] | None = None,
                 rounds: int = 300) -> dict[str, dict[str, float]]:
    """Per family, how likely a question with each key is kept, so that over the collection every value is
    the key of a quarter of the questions that show it: a model without the image then learns nothing from
    which values are shown. The wrong options of a question are drawn by `Vocabulary.draw` from its pool,
    so value v is one of them with a known chance (`_inclusion`); summed over the questions each key asks,
    each weighed by its share of being asked (`shares`, see `Vocabulary.balanced`), that is a matrix, and
    the keep chances are its leading eigenvector, found by power iteration and scaled so the largest is 1
    (each value shown as a wrong option three times as often as it is a kept key). Where the pool is every
    key of the family, this gives each value of any four shown the same chance of being the key; where it
    varies (a label present in a photo is no wrong option there), on the whole."""
    tally: dict[str, Counter] = defaultdict(Counter)
    shown: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))  # key -> value -> times shown
    for ask, share in zip(asks, shares or [1.0] * len(asks)):
        weights = vocabulary.weights(ask.family)
        members = sorted({v for v in (weights if ask.pool is None else ask.pool) if v != ask.key and v in weights})
        if ask.key not in weights or len(members) < 3:
            continue
        tally[ask.family][ask.key] += share
        for value, chance in _inclusion(members, [weights[v] for v in members]).items():
            shown[ask.family][ask.key][value] += share * chance
    chances = {}
    for family in sorted(tally):
        values = [v for v in sorted(vocabulary.weights(family), key=_value_order) if tally[family][v] > 0]
        counted = np.array([tally[family][v] for v in values])
        matrix = np.array([[shown[family][u][v] for v in values] for u in values])  # key u -> value v shown
        chance = np.ones(len(values))
        for _ in range(rounds):
            # numpy's pairwise sums: the same bits in every process, whatever its BLAS threads
            wanted = (chance[:, None] * matrix).sum(axis=0) / (3 * counted)
            if wanted.max(initial=0.0) <= 0:
                break
            # half a step at a time: a plain power iteration can swing between two states
            chance = (chance + wanted / wanted.max()) / 2
            chance = chance / chance.max()
        chances[family] = {v: round(float(c), 6) for v, c in sorted(zip(values, chance))}
    return chances


def _asked_shares(asks: list[Ask], chances: dict[str, dict[str, float]], cap: int) -> list[float]:
    """For each ask, the chance that its question, once kept, is among the `cap` its group asks: the group's
    kept questions are drawn in a random order, so with k others kept it is asked with chance
    min(1, cap / (k + 1)); k follows the others' keep chances (a Poisson binomial)."""
    members: dict[tuple[str, str] | None, list[int]] = defaultdict(list)
    for index, ask in enumerate(asks):
        members[ask.group].append(index)
    kept = [chances.get(ask.family, {}).get(ask.key, 0.0) for ask in asks]
    shares = [1.0] * len(asks)
    for group, indices in members.items():
        if group is None or len(indices) <= cap:
            continue
        everyone = [1.0]   # how many of the group's questions are kept: its distribution
        for index in indices:
            p = kept[index]
            everyone = [a * (1 - p) + b * p for a, b in zip([*everyone, 0.0], [0.0, *everyone])]
        asked = [min(1.0, cap / (k + 1)) for k in range(len(everyone))]
        for index in indices:
            shares[index] = math.fsum(c * a for c, a in zip(_without(everyone, kept[index]), asked))
    return shares


def _without(distribution: list[float], p: float) -> list[float]:
    """The distribution of a number of successes with one trial of chance `p` taken out: `distribution`
    divided by (1 - p + p x), worked from the end where that is stable (the low end when p <= 1/2)."""
    n = len(distribution) - 1
    out = [0.0] * n
    if p <= 0.5:
        for k in range(n):
            out[k] = (distribution[k] - p * (out[k - 1] if k else 0.0)) / (1 - p)
    else:
        for k in range(n - 1, -1, -1):
            out[k] = (distribution[k + 1] - (1 - p) * (out[k + 1] if k + 1 < n else 0.0)) / p
    return [max(0.0, v) for v in out]


def _inclusion(values: list[str], weights: list[float]) -> dict[str, float]:
    """For a set of three of `values` drawn with chance proportional to the product of its weights, the
    chance that each value is in it: w times e2 of the others, over e3 of all."""
    e = _elementary(weights, 3)
    return {v: w * (e[2] - w * (e[1] - w)) / e[3] for v, w in zip(values, weights)} if e[3] > 0 else {}


def _elementary(weights: list[float], n: int) -> list[float]:
    """The elementary symmetric sums e0..en of `weights` (e_k: the sum of the products of every k of them)."""
    sums = [1.0] + [0.0] * n
    for w in weights:
        for k in range(n, 0, -1):
            sums[k] += w * sums[k - 1]
    return sums


def _product_sample(values: list[str], weights: list[float], n: int, rng: random.Random) -> list[str]:
    """`n` of `values`, each set drawn with chance proportional to the product of its weights: walk the
    values once, taking each with the chance that it is in the set given the ones taken so far."""
    suffix = [_elementary(weights[i:], n) for i in range(len(weights) + 1)]
    out: list[str] = []
    for i, value in enumerate(values):
        need = n - len(out)
        if need == 0:
            break
        if rng.random() * suffix[i][need] < weights[i] * suffix[i + 1][need - 1]:
            out.append(value)
    return out


FALLBACK_SUPPORT = {"count": tuple(str(n) for n in range(6)), "spatial": ("above", "below", "left", "right"),
                    "location": ("bottom centre", "bottom left", "bottom right", "centre", "middle left",
                                 "middle right", "top centre", "top left", "top right")}


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
    size: tuple[int, int] = DEFAULT_SIZE  # the image's, in pixels

    @property
    def pixels(self) -> float:
        return (self.box[2] - self.box[0]) * (self.box[3] - self.box[1]) * self.size[0] * self.size[1]

    def describe(self) -> dict[str, str]:
        return {"label": self.label} | {k: self.attributes[k] for k in DESCRIBING if k in self.attributes}

    @property
    def centre(self) -> tuple[float, float]:
        return (self.box[0] + self.box[2]) / 2, (self.box[1] + self.box[3]) / 2


def things_in(facts: list[Fact], size: tuple[int, int] = DEFAULT_SIZE) -> list[Thing]:
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
    firsts = {form[0] for form in forms}
    for caption in captions:
        words = _words(caption)
        if firsts.isdisjoint(words):  # most labels are named in no caption: skip the walk
            continue
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
    return vocabulary.plurals[label] if label in vocabulary.plurals else _inflected_plural(label)


@lru_cache(maxsize=4096)
def _inflected_plural(label: str) -> str:
    """`inflect`'s plural of `label` (slow: captions are searched for every label of the collection)."""
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


# -- Questions over labels ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Choice:
    """A question whose options are labels: it is true of the `true` labels and surely false of the `false`
    ones (what the truth cannot settle is in neither); each true label makes one draft, balanced over
    `family` (`choice_drafts`)."""

    family: str
    text: str
    true: tuple[str, ...]
    false: tuple[str, ...]
    meta: dict
    plural: bool = False  # the options are spoken in the plural ("dogs")


def absent_labels(things: list[Thing], captions: list[str], vocabulary: Vocabulary) -> set[str]:
    """The collection's labels with no box in the image that no caption names: nowhere to be seen."""
    present = {t.label for t in things}
    return {label for label in vocabulary.labels if label not in present and not mentions(captions, label, vocabulary)}


def choice_drafts(choices: list[Choice], vocabulary: Vocabulary, rng: random.Random) -> list[Draft]:
    """A draft per true label of each choice: the wrong options drawn from its false labels by their weights in
    the family (`Vocabulary.draw`), kept by `_balanced`, so that no label is a likelier key than the others
    it is shown with."""
    drafts = []
    for choice in choices:
        for label in choice.true:
            others = vocabulary.draw(choice.family, label, choice.false, rng)
            if others is None:
                continue
            spoken = [plural(v, vocabulary) if choice.plural else vocabulary.names.get(v, v)
                      for v in (label, *shuffled(rng, others))]
            draft = Draft(choice.text, tuple(spoken), choice.meta | {"key_label": label})
            drafts.append(_balanced(draft, choice.family, label, vocabulary, rng))
    return drafts


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


def _has_text(facts: list[Fact]) -> bool:
    return any(f.kind == "ocr" and f.text.strip() for f in facts)


def counting(things, facts, vocabulary, settings, rng) -> list[Draft]:
    """How many of each label (colour, everything) there are, over four numbers (`Vocabulary.draw`); and which
    of four labels there is exactly n of (`count_choices`)."""
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
        others = vocabulary.draw(family, str(n), [v for v in support if int(v) not in unfit], rng)
        if others is None:
            continue
        draft = Draft(text, (str(n), *shuffled(rng, others)), meta)
        if unsure:
            drafts.append(replace(draft, dropped=unsure, rule="inexact_truth"))
        elif str(n) not in support:
            drafts.append(replace(draft, dropped=f"count {n} is outside the counts asked about "
                                                 f"({', '.join(support)}): the options would give it away"))
        else:
            drafts.append(_balanced(draft, family, str(n), vocabulary, rng))
    return drafts + choice_drafts(count_choices(things, captions, vocabulary, settings), vocabulary, rng)


SPOKEN_NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def count_choices(things: list[Thing], captions: list[str], vocabulary: Vocabulary,
                  settings: ProgrammaticSettings) -> list[Choice]:
    """"Which of these is there exactly n of?" for each n that some label's boxes settle exactly. Surely not n:
    a label whose count is settled as another number, one with more than n instances of visible size clear of the border
    (the count is unsettled, but above n), and a label absent from the boxes and the captions; never one a
    caption says n of."""
    labels = sorted({t.label for t in things})
    exact = {label: n for label in labels
             if not count_doubt("label", label, n := sum(t.label == label for t in things), things, captions,
                                vocabulary, settings)}
    visible = {label: sum(t.label == label and not t.crowd and t.pixels >= settings.min_pixels
                          and min(t.box[0], t.box[1], 1 - t.box[2], 1 - t.box[3]) >= settings.border for t in things)
               for label in labels}
    absent = absent_labels(things, captions, vocabulary)
    choices = []
    for n in sorted(set(exact.values())):
        if not 0 < n < len(SPOKEN_NUMBERS):
            continue
        said = {label for label in labels
                if any(number == n for number, _many in mentions(captions, label, vocabulary))}
        true = {label for label, count in exact.items() if count == n}
        false = ({label for label, count in exact.items() if count != n} | {l for l in labels if visible[l] > n}
                 | absent) - said - true
        text = ("Which of these is there exactly one of in the image?" if n == 1
                else f"Which of these are there exactly {SPOKEN_NUMBERS[n]} of in the image?")
        choices.append(Choice(f"count_choice:{n}", text, tuple(sorted(true)), tuple(sorted(false)),
                              {"template": "count_choice", "count": n}, plural=n > 1))
    return choices


def count_doubt(key: str, value: str, n: int, things: list[Thing], captions: list[str], vocabulary: Vocabulary,
                settings: ProgrammaticSettings) -> str:
    """Why the count of group (`key`, `value`) cannot be settled exactly as `n`, or "" (see `doubt`)."""
    counted = [t for t in things if key == "all" or (t.label if key == "label" else t.attributes.get(key)) == value]
    return next((why for t in counted if (why := doubt(t, things, settings))), "") or (
        caption_conflict(captions, value, n, vocabulary) if key == "label" else "")


def _balanced(draft: Draft, family: str, key: str, vocabulary: Vocabulary, rng: random.Random) -> Draft:
    """`draft`, kept with its key's keep chance (`keep_chances`): a key asked about more often than a quarter
    of the times it is shown would be a prior a blind model learns."""
    if rng.random() < vocabulary.keep_chance(family, key):
        return draft
    return replace(draft, dropped=f"the key {key!r} is already the key of a quarter of the questions of this "
                                  f"template ({family}) that show it; asking it again would make it a guessable prior")


def key_tallies(facts: list[Fact], vocabulary: Vocabulary, settings: ProgrammaticSettings,
                sizes: Mapping[str, tuple[int, int]] | None = None) -> list[Ask]:
    """Every question the collection could ask of a balanced family (`Ask`), for `Vocabulary.balanced`:
    counts per family (every object, per label, per colour, one absent label and colour per image) that the
    truth settles exactly, the spatial relations between pairs of objects that could be asked about, the
    labels an identity question could name (with the absent labels as its wrong options) and the labels a
    question over labels (`Choice`) is true of, each grouped by its item and dimension. Only what is asked
    is tallied: a key dropped for doubt would otherwise weigh in."""
    asks: list[Ask] = []
    rng = random.Random(0)
    for item_id, item_facts, things in _things_per_item(facts, sizes):
        captions = captions_of(item_facts)
        by_counting, by_identity, by_location, by_spatial = ((item_id, d) for d in (
            "instances_counting", "instance_identity", "instance_location", "spatial_relation"))
        for (key, value), n in count_groups(things, vocabulary, rng, _has_text(item_facts),
                                            settings.labels_exhaustive).items():
            if not count_doubt(key, value, n, things, captions, vocabulary, settings):
                asks.append(Ask(f"count:{key}", str(n), None, by_counting))
        absent = tuple(sorted(absent_labels(things, captions, vocabulary)))
        asks += [Ask("identity", label, absent, by_identity)
                 for label in sorted({t.label for t in things if t.crowd or t.pixels >= settings.min_pixels})]
        asks += [Ask("spatial", where, None, by_spatial) for _a, _b, where in spatial_pairs(things, settings)]
        asks += [Ask("location", region_name(*cell), tuple(wrong_regions(t, *cell, settings)), by_location)
                 for t in things if (cell := located(t, settings)) and referent(t, things) is not None]
        for choices, group in ((count_choices(things, captions, vocabulary, settings), by_counting),
                               (location_choices(things, captions, vocabulary, settings), by_location),
                               (spatial_choices(things, captions, vocabulary, settings), by_spatial)):
            asks += [Ask(choice.family, label, choice.false, group) for choice in choices for label in choice.true]
    return asks


def absent_weights(facts: list[Fact], vocabulary: Vocabulary, settings: ProgrammaticSettings,
                   sizes: Mapping[str, tuple[int, int]] | None = None, rounds: int = 30) -> dict[str, float]:
    """How likely each label is picked as the one absent thing an image counts (key 0), so that over the
    collection each label is the absent one in as many count questions, relative to the exact counts
    asked about it where present, as every other label: the label a question names then does not tell a
    model without the image whether the key is 0 (a label present in most photos is absent from few,
    so it needs a heavier weight there). Fitted by iterative proportional scaling; a label present
    almost everywhere gets what its few absences allow."""
    present: list[set[str]] = []
    exact: Counter = Counter()
    for _item_id, item_facts, things in _things_per_item(facts, sizes):
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


def _things_per_item(facts: list[Fact], sizes: Mapping[str, tuple[int, int]] | None):
    """Each item with objects (`_per_item`), with its facts and its objects at the item's size (the default
    `things_in` size when `sizes` lacks it)."""
    for item_id, item_facts in _per_item(facts).items():
        if things := things_in(item_facts, (sizes or {}).get(item_id, DEFAULT_SIZE)):
            yield item_id, item_facts, things


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


def location(things, facts, vocabulary, settings, rng) -> list[Draft]:
    """In which part of the image an object its label alone picks out is, over regions; and which of four
    labels is in a region (`location_choices`)."""
    drafts = []
    for thing in things:
        target = referent(thing, things)
        column, row = (grid_cell(v, settings.grid_margin) for v in thing.centre)
        if target is None or row is None or column is None or thing.crowd:
            continue
        # drawn by how often each region is a key (`Vocabulary.draw`), not the neighbours (they would surround
        # the key), nor a cell holding a fair share of the box (a viewer could defend it)
        key = region_name(row, column)
        chosen = vocabulary.draw("location", key, wrong_regions(thing, row, column, settings), rng)
        if chosen is None:
            continue
        draft = Draft(f"In which part of the image {be(target, vocabulary)} {phrase(target, vocabulary)}?",
                      (key, *shuffled(rng, chosen)), {"template": "location", "target": target})
        share = cell_share(thing.box, row, column)
        if thing.pixels < settings.min_pixels:
            draft = replace(draft, dropped=f"it covers under {settings.min_pixels} pixels", rule="inexact_truth")
        elif share < settings.region_share:
            draft = replace(draft, dropped=f"only {share:.0%} of its box lies in the {key} region: it straddles "
                                           f"or fills several", rule="inexact_truth")
        else:
            draft = _balanced(draft, "location", key, vocabulary, rng)
        drafts.append(draft)
    return drafts + choice_drafts(location_choices(things, captions_of(facts), vocabulary, settings), vocabulary, rng)


def wrong_regions(thing: Thing, row: int, column: int, settings: ProgrammaticSettings) -> list[str]:
    """The regions other than (row, column) holding under `region_spill` of `thing`'s box."""
    return [region_name(r, c) for r in range(3) for c in range(3)
            if (r, c) != (row, column) and cell_share(thing.box, r, c) < settings.region_spill]


def located(thing: Thing, settings: ProgrammaticSettings) -> tuple[int, int] | None:
    """The grid cell (row, column) `thing` is plainly in: its centre clear of the grid lines, at least
    `region_share` of its box in the cell, of visible size and not a crowd region; else None."""
    column, row = (grid_cell(v, settings.grid_margin) for v in thing.centre)
    if row is None or column is None or thing.crowd or thing.pixels < settings.min_pixels:
        return None
    return (row, column) if cell_share(thing.box, row, column) >= settings.region_share else None


def cell_cover(box: tuple[float, float, float, float], row: int, column: int) -> float:
    """The share of grid cell (row, column) that `box` covers."""
    return cell_share(box, row, column) * (box[2] - box[0]) * (box[3] - box[1]) * 9


def location_choices(things: list[Thing], captions: list[str], vocabulary: Vocabulary,
                     settings: ProgrammaticSettings) -> list[Choice]:
    """"Which of these is in the top left of the image?" for each cell some object is plainly in (`located`):
    true of those objects' labels; surely false of a label every box of which keeps out of the cell (under
    `region_spill` of the box in it, and under that share of the cell covered) and of a label absent from the
    boxes and the captions."""
    absent = absent_labels(things, captions, vocabulary)
    choices = []
    for row, column in sorted({cell for t in things if (cell := located(t, settings))}):
        true = {t.label for t in things if located(t, settings) == (row, column)}
        false = {label for label in {t.label for t in things} - true
                 if all(cell_share(t.box, row, column) < settings.region_spill
                        and cell_cover(t.box, row, column) < settings.region_spill for t in things if t.label == label)}
        name = region_name(row, column)
        choices.append(Choice("location_choice", f"Which of these is in the {name} of the image?", tuple(sorted(true)),
                              tuple(sorted(false | absent)), {"template": "location_choice", "region": name}))
    return choices


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


def spatial_pairs(things: list[Thing], settings: ProgrammaticSettings) -> list[tuple[Thing, Thing, str]]:
    """The ordered pairs a relation question can be about, with the relation: one relation alone holds
    (`relation`), each object picked out by its description alone, neither a crowd region."""
    return [(a, b, where) for a, b in itertools.permutations(things, 2)
            if (where := relation(a, b, settings.spatial_gap)) is not None and not (a.crowd or b.crowd)
            and referent(a, things) is not None and referent(b, things) is not None]


def spatial(things, facts, vocabulary, settings, rng) -> list[Draft]:
    """Where one object is relative to another, over the four relations; and which of four labels is to one
    side of an object (`spatial_choices`)."""
    drafts = []
    for a, b, where in spatial_pairs(things, settings):
        target, other = referent(a, things), referent(b, things)
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
    return drafts + choice_drafts(spatial_choices(things, captions_of(facts), vocabulary, settings), vocabulary, rng)


SIDES = {"left": "to the left of", "right": "to the right of", "above": "above", "below": "below"}


def beside(thing: Thing, anchor: Thing, where: str, gap: float) -> bool:
    """Whether `thing`'s box lies wholly on the `where` side of `anchor`'s, `gap` apart, and its centre is
    farther off that way than across: true of a thing up and to the left when asked which thing is to the
    left (no option is another direction that would be true too, as in `relation`)."""
    (ax, ay), (bx, by) = thing.centre, anchor.centre
    along, across = (bx - ax, abs(by - ay)) if where in ("left", "right") else (by - ay, abs(bx - ax))
    apart = {"left": thing.box[2] + gap <= anchor.box[0], "right": anchor.box[2] + gap <= thing.box[0],
             "above": thing.box[3] + gap <= anchor.box[1], "below": anchor.box[3] + gap <= thing.box[1]}[where]
    return apart and abs(along) >= across


def _clear_of(thing: Thing, anchor: Thing, where: str) -> bool:
    """Whether no part of `thing` lies on the `where` side of `anchor`'s centre: it is surely not there."""
    (cx, cy), (x1, y1, x2, y2) = anchor.centre, thing.box
    return {"left": x1 >= cx, "right": x2 <= cx, "above": y1 >= cy, "below": y2 <= cy}[where]


def spatial_choices(things: list[Thing], captions: list[str], vocabulary: Vocabulary,
                    settings: ProgrammaticSettings) -> list[Choice]:
    """"Which of these is to the left of the dog?" about each object its description picks out (of visible
    size, not a crowd region) and each side: true of the labels with an object of visible size wholly on that
    side of it (`beside`); surely false of a label no box of which reaches past its centre
    towards that side, and of a label absent from the boxes and the captions."""
    absent = absent_labels(things, captions, vocabulary)
    choices = []
    for anchor in things:
        other = referent(anchor, things)
        if other is None or anchor.crowd or anchor.pixels < settings.min_pixels:
            continue
        others = [t for t in things if t.label != anchor.label]
        for where, words in SIDES.items():
            true = {t.label for t in others if not t.crowd and t.pixels >= settings.min_pixels
                    and beside(t, anchor, where, settings.spatial_gap)}
            if not true:
                continue
            false = {label for label in {t.label for t in others} - true
                     if all(_clear_of(t, anchor, where) for t in others if t.label == label)}
            choices.append(Choice("spatial_choice", f"Which of these is {words} {phrase(other, vocabulary)}?",
                                  tuple(sorted(true)), tuple(sorted(false | (absent - {anchor.label}))),
                                  {"template": "spatial_choice", "relation": where, "other": other}))
    return choices


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
    three other pairs all absent from the image. Without: the label and three absent ones drawn by their
    weights (`Vocabulary.draw`), so that no label is a likelier key than the others shown with it. A label
    shown only too small to see is not the key; one a caption names is never a wrong option."""
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
            # the wrong labels drawn by their weights as keys (`Vocabulary.draw`) and the key kept by `_balanced`:
            # given the four labels shown, each is the key about as often
            drawn = vocabulary.draw("identity", label, [v for v in vocabulary.labels if v not in present_labels], rng)
            others = [vocabulary.names.get(v, v) for v in shuffled(rng, drawn or [])]
        if len(others) < 3:
            continue
        draft = Draft("Which of these can be seen in the image?", (_name(label, colour, vocabulary), *others),
                      {"template": "identity", "target": {"label": label} | ({"colour": colour} if colour else {})})
        if not colour:
            draft = _balanced(draft, "identity", label, vocabulary, rng)
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
