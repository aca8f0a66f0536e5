"""Image sets for the LLM generator, grouped from a maintainer's own stored images by their facts.

Two images are alike when they share an object label (`by: labels`), or when their captions' words
overlap by `min_overlap` (Jaccard, `by: captions`). The images are taken in id order; each one not yet
grouped starts a set that the later ones alike with every member so far join, until it has `size`
images (greedy). So the same images and facts give the same sets whatever order they arrived in.

It is one runner stage, `generate:sets`, with a single unit whose subject hashes every image's labels or
caption words: it runs again only when those change. Images already in a set (a scene set, or one grouped
under these settings) are left out, so a rerun adds nothing and later images are grouped among
themselves and the ones left over.
"""

from __future__ import annotations

import heapq
import itertools
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from benchsmith import runner
from benchsmith.records import MAX_SET_IMAGES, Fact, ImageSet, normalise_text, stable_hash
from benchsmith.settings import Settings, Strict, keyed
from benchsmith.similarity import jaccard, word_set
from generators.base import GeneratorStage


class SetSettings(Strict):
    """`generate.llm.sets`: how stored images are grouped into sets for dimensions 27-29."""

    size: int = Field(2, ge=2, le=MAX_SET_IMAGES)
    by: Literal["labels", "captions"] = "labels"
    min_overlap: float = Field(0.5, gt=0, le=1)  # captions: shared words over all words of two images' captions
    max_sets: int | None = Field(None, ge=1)     # sets grouped under these settings, at most


def features(facts: list[Fact], by: str) -> frozenset[str]:
    """What an image is compared by: its object labels, or its captions' words."""
    if by == "labels":
        return frozenset(normalise_text(f.text) for f in facts if f.kind == "object")
    return frozenset().union(*(word_set(f.text) for f in facts if f.kind == "caption"))


def _after(positions: list[int], k: int) -> Iterator[int]:
    """The ascending positions after k, read lazily: a long list is not copied for every image."""
    return (positions[j] for j in range(bisect_right(positions, k), len(positions)))


def grouped(compared: dict[str, frozenset[str]], settings: SetSettings, room: int | None = None) -> list[list[str]]:
    """Sets of image ids (each in id order), greedy in id order; at most `room` of them.

    An image alike with a set's first member shares a label or word with it, so only the later images
    listed under one of its labels or words are looked at, in id order: the same sets as trying every
    later image, without comparing every pair of images of a large collection."""
    def alike(a: frozenset[str], b: frozenset[str]) -> bool:
        return bool(a & b) if settings.by == "labels" else jaccard(a, b) >= settings.min_overlap

    ids = sorted(i for i, f in compared.items() if f)
    listed: dict[str, list[int]] = defaultdict(list)  # label or word -> positions in ids, ascending
    for position, i in enumerate(ids):
        for feature in compared[i]:
            listed[feature].append(position)
    taken: set[str] = set()
    sets: list[list[str]] = []
    for k, seed in enumerate(ids):
        if len(sets) == room:
            break
        if seed in taken:
            continue
        members = [seed]
        candidates = heapq.merge(*(_after(listed[feature], k) for feature in compared[seed]))
        for position, _same in itertools.groupby(candidates):  # an image listed under several of them: once
            if len(members) == settings.size:
                break
            other = ids[position]
            if other not in taken and all(alike(compared[m], compared[other]) for m in members):
                members.append(other)
        if len(members) == settings.size:
            sets.append(members)
            taken.update(members)
    return sets


@dataclass(frozen=True)
class Grouping:
    """The stage's one unit: the ungrouped images with what they are compared by, and how many sets
    these settings may still make."""

    subject: str
    compared: dict[str, frozenset[str]]
    room: int | None


class SetGroupingStage(GeneratorStage):
    """Groups the stored images into sets (`generate.llm.sets`) before the LLM generator asks about them."""

    generator = "sets"
    counts = ("sets",)

    def __init__(self, settings: Settings, options) -> None:
        llm = options.part("llm")
        super().__init__(settings, llm.options)
        self.own: SetSettings = llm.sets

    @property
    def uses_llm(self) -> bool:
        return False

    def config_key(self) -> str:
        return runner.config_key(self.generator, keyed(self.own))

    def units(self, context: runner.StageContext) -> list[Grouping]:
        store, key = context.store, self.config_key()
        ids = store.item_ids(kind="image")
        compared = {i: features(f, self.own.by) for i, f in store.get_facts(ids, kinds=["object", "caption"]).items()}
        sets = store.get_items(kind="image_set")
        ours = sum(s.annotations.get("grouping") == key for s in sets)
        # members of scene sets and of sets grouped under these settings; not of those grouped otherwise
        taken = {m for s in sets if s.annotations.get("grouping", key) == key for m in s.images}
        subject = stable_hash(sorted((i, sorted(f)) for i, f in compared.items() if f))
        room = None if self.own.max_sets is None else max(0, self.own.max_sets - ours)
        return [Grouping(subject, {i: f for i, f in compared.items() if i not in taken}, room)]

    def subject(self, unit: Grouping) -> str:
        return unit.subject

    def process(self, units: Sequence[Grouping], context: runner.StageContext) -> Iterator[tuple[Grouping, list]]:
        for unit in units:
            sets = grouped(unit.compared, self.own, unit.room)
            images = {i.id: i for i in context.store.get_items(sorted({m for s in sets for m in s}))} if sets else {}
            yield unit, [ImageSet.of([images[m] for m in s], annotations={"grouping": self.config_key()})
                         for s in sets]

    def commit(self, context: runner.StageContext, pairs: list[tuple[Grouping, list[ImageSet]]],
               report: runner.StageReport) -> list[runner.Outcome]:
        for _unit, sets in pairs:
            report.counters["sets"] += context.store.add_items(sets)
        return [runner.Outcome(unit.subject, "done", details={"sets": len(sets)}) for unit, sets in pairs]
