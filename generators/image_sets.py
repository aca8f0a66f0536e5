"""Exact questions over the images of a scene set (`ingest.scene_sets`): the `multi_image` dimensions.

A set's truth lists every image's shapes (by id, with colour, shape, size and box) and signs, so what
differs between any two images is worked out here (`differences`), not read from the recorded changes;
the tests check the keys against those. Shapes are named by colour and shape, which pick out one in a set.

- Image Differences: what changed between image i and image j, when one thing did (the other options:
  changes of other kinds that did not happen, to shapes of the same images); which shape moved, changed
  colour or size, is in one image and not the other, also between two changed copies (the other options:
  shapes the same in both); what a changed sign now reads (the one question about a sign's change).
- Image Comparison: which shape is in every image (the others: shapes in some images only, and shapes in
  none); with four images, which one is the odd one out for a shape or a sign, which shows the most or the
  fewest shapes of a kind, in which one a relation between two shapes holds; with three or more, which
  shape looks different in one image from all the others.
- Visual Correspondence: the shape alone in a part of image i is which shape of image j (the other
  options: image j's other shapes), for the shapes that changed between them and two that did not; and,
  when it changed colour, which colour it is in image j (the other options: other colours, never the one
  named in the question); in a marked pair, which shape of image 2 is the one inside the frame drawn in
  image 1 (nothing else is asked about a marked pair: the frame is itself a difference).

Every draft has its key first; the quality gate, the letter balance and the blind filter then treat them
like any other question.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Iterator, Sequence

from pydantic import Field

from benchsmith import runner
from benchsmith.dimensions import Dimension
from benchsmith.records import ImageSet, Question, stable_hash
from benchsmith.settings import Strict
from generators.programmatic import Draft, Thing, four_options, grid_cell, questions_from, region_name, relation
from generators.stage import Job, Outcome, QuestionStage
from ingest.scene_sets import CHANGES
from ingest.scenes import COLOURS, SHAPES, SIZES, words_like

BACKEND = "image_sets"
# v2: no sign in "what changed", distractors drawn at random, correspondence about unchanged shapes too;
# v3: "which shape" also between two changed copies, up to 10 questions a set and dimension; marked pairs
VERSION = "image-sets-v3"


class ImageSetSettings(Strict):
    per_dimension: int = Field(10, ge=1)      # at most this many questions per set and dimension
    grid_margin: float = Field(0.04, ge=0)    # a centre this close to a grid line has no clear region
    spatial_gap: float = Field(0.02, ge=0)    # boxes this far apart for a relation between two shapes


def name(shape: dict) -> str:
    return f"{shape['colour']} {shape['shape']}"


def differences(a: dict, b: dict) -> list[dict]:
    """What changed from scene `a` to scene `b` (a set's `scenes` entries): {kind, before, after}."""
    before, after = ({o["id"]: o for o in s["objects"]} for s in (a, b))
    found = [{"kind": "removed", "before": before[i], "after": None} for i in sorted(before.keys() - after.keys())]
    found += [{"kind": "added", "before": None, "after": after[i]} for i in sorted(after.keys() - before.keys())]
    for i in sorted(before.keys() & after.keys()):
        x, y = before[i], after[i]
        kind = ("resized" if x["size"] != y["size"] else "recoloured" if x["colour"] != y["colour"]
                else "moved" if x["box"] != y["box"] else None)
        if kind:
            found.append({"kind": kind, "before": x, "after": y})
    found += [{"kind": "text", "before": x, "after": y, "sign": k}
              for k, (x, y) in enumerate(zip(a["signs"], b["signs"])) if x != y]
    return found


def subject(change: dict) -> tuple[str, int]:
    """The shape or sign a change is about."""
    if change["kind"] == "text":
        return "sign", change["sign"]
    return "shape", (change["before"] or change["after"])["id"]


def sentence(change: dict) -> str:
    """A change to a shape in words, as an option of 'what changed'."""
    kind, x, y = change["kind"], change["before"], change["after"]
    if kind == "added":
        return f"{'An' if y['colour'][0] in 'aeiou' else 'A'} {name(y)} appeared"
    if kind == "recoloured":
        return f"The {x['colour']} {x['shape']} turned {y['colour']}"
    if kind == "resized":
        bigger = list(SIZES).index(y["size"]) > list(SIZES).index(x["size"])
        return f"The {name(x)} got {'bigger' if bigger else 'smaller'}"
    return f"The {name(x)} {'moved' if kind == 'moved' else 'disappeared'}"


def _absent(rng: random.Random, scenes: Sequence[dict]) -> dict:
    """A colour and shape no image of the set shows."""
    shown = {name(o) for s in scenes for o in s["objects"]}
    return rng.choice([{"colour": c, "shape": s, "size": "medium"} for c in COLOURS for s in SHAPES
                       if f"{c} {s}" not in shown])


def _fake(kind: str, scenes: Sequence[dict], still: list[dict], rng: random.Random) -> dict | None:
    """A change of `kind` to a shape that did not happen between two images: to a shape taken from `still`
    (unchanged between them, shuffled; each fake takes its own, so no shape is named twice among the options
    while the real change's is named once), or a shape no image shows."""
    if kind == "added":
        return {"kind": kind, "before": None, "after": _absent(rng, scenes)}
    if not still:
        return None
    shape = still.pop()
    if kind == "recoloured":
        shown = {name(o) for s in scenes for o in s["objects"]}
        colours = [c for c in COLOURS if f"{c} {shape['shape']}" not in shown]
        return {"kind": kind, "before": shape, "after": shape | {"colour": rng.choice(colours)}} if colours else None
    if kind == "resized":
        size = rng.choice([s for s in SIZES if s != shape["size"]])
        return {"kind": kind, "before": shape, "after": shape | {"size": size}}
    return {"kind": kind, "before": shape, "after": None if kind == "removed" else shape}


def _unchanged(a: dict, b: dict) -> list[dict]:
    """The shapes of a that b shows the same."""
    after = {o["id"]: o for o in b["objects"]}
    return [o for o in a["objects"] if after.get(o["id"]) == o]


WHICH = {"moved": "Which shape moved between image {i} and image {j}?",
         "recoloured": "Which shape changed colour between image {i} and image {j}?",
         "resized": "Which shape changed size between image {i} and image {j}?",
         "removed": "Which shape is in image {i} but not in image {j}?",
         "added": "Which shape is in image {j} but not in image {i}?"}


def image_differences(scenes: Sequence[dict], rng: random.Random, _settings: ImageSetSettings) -> list[Draft]:
    drafts = []
    for (i, a), (j, b) in itertools.combinations(enumerate(scenes, 1), 2):
        found, still = differences(a, b), _unchanged(a, b)
        if len(found) == 1 and found[0]["kind"] == "text":
            old, new = found[0]["before"], found[0]["after"]
            others = [" ".join(words_like(rng, new, avoid=old + new)) for _ in range(6)]
            if options := four_options(rng, " ".join(new), set(others)):
                drafts.append(Draft(f"The sign that reads \"{' '.join(old)}\" in image {i}: what does it read in "
                                    f"image {j}?", options, {"template": "sign_text"}))
        elif len(found) == 1:
            # A sign's change is asked about by its words alone (sign_text): the blind filter drops a "what
            # changed" whose key quotes the words a sibling question asks about, so the sign's option would
            # be left as a distractor that is never the key.
            kinds = [k for k in CHANGES if k not in (found[0]["kind"], "text")]
            pool = rng.sample(still, len(still))
            fakes = [f for k in rng.sample(kinds, len(kinds)) if (f := _fake(k, scenes, pool, rng))]
            if len(fakes) >= 3:
                drafts.append(Draft(f"What changed between image {i} and image {j}?",
                                    (sentence(found[0]), *map(sentence, fakes[:3])), {"template": "what_changed"}))
        # which shape moved (changed colour, ...) also between two changed copies, where more than one thing
        # changed: the others are shapes the same in both images, so only one option changed at all
        kinds_found = Counter(c["kind"] for c in found)
        for change in found:
            if change["kind"] != "text" and kinds_found[change["kind"]] == 1 and (
                    options := four_options(rng, name(change["before"] or change["after"]), map(name, still))):
                drafts.append(Draft(WHICH[change["kind"]].format(i=i, j=j), options, {"template": "which_shape"}))
    return drafts


def _odd_images(scenes: Sequence[dict]) -> Iterator[tuple[int, dict]]:
    """Each image t that shows a shape or sign otherwise than all the other images, which agree on it:
    (t, the change from another image to t)."""
    states = [{("shape", o["id"]): o for o in s["objects"]} | {("sign", k): w for k, w in enumerate(s["signs"])}
              for s in scenes]
    for about in sorted(set().union(*states)):
        seen = [state.get(about) for state in states]
        for t, mine in enumerate(seen):
            rest = seen[:t] + seen[t + 1:]
            if mine != rest[0] and all(r == rest[0] for r in rest):
                other = scenes[seen.index(rest[0])]
                yield t + 1, next(c for c in differences(other, scenes[t]) if subject(c) == about)


def _some(rng: random.Random, drafts: list[Draft], n: int) -> list[Draft]:
    """At most n of a template's drafts, so one template with many does not crowd out the others."""
    return rng.sample(drafts, min(n, len(drafts)))


ODD = {"moved": "In which image is the {name} somewhere else than in the other images?",
       "recoloured": "In which image is the {shape} that is {colour} in the other images a different colour?",
       "resized": "In which image is the {name} a different size than in the other images?",
       "removed": "Which image is the only one without the {name}?",
       "added": "Which image is the only one with a {name}?",
       "text": "In which image does the sign that reads \"{words}\" in the other images read something else?"}


def _counts(scene: dict) -> Counter:
    things = scene["objects"]
    return Counter({"shapes": len(things)}) + Counter(f"{o['colour']} shapes" for o in things) + Counter(
        f"{o['shape']}s" for o in things)


def image_comparison(scenes: Sequence[dict], rng: random.Random, settings: ImageSetSettings) -> list[Draft]:
    n, drafts, shown = len(scenes), [], []
    every = set.intersection(*({name(o) for o in s["objects"]} for s in scenes))
    names: dict[int, set[str]] = {}
    for o in (o for s in scenes for o in s["objects"]):
        names.setdefault(o["id"], set()).add(name(o))
    # one name per shape: a recoloured shape's two names would share a word that the key never shares
    some = [rng.choice(sorted(n)) for _id, n in sorted(names.items()) if not n & every]
    for key in sorted(every):
        if options := four_options(rng, key, {*some, *(name(_absent(rng, scenes)) for _ in range(3))}):
            shown.append(Draft("Which shape is in every image?" if n > 2 else "Which shape is in both images?",
                               options, {"template": "in_every_image"}))
    drafts += _some(rng, shown, 1)
    images = [f"image {k}" for k in range(1, n + 1)]

    def which_image(text: str, t: int, template: str) -> Draft:
        return Draft(text, (images[t - 1], *(m for m in images if m != images[t - 1])), {"template": template})

    for t, change in _odd_images(scenes) if n >= 3 else ():
        x, y = change["before"], change["after"]
        if n == 4:
            words = ({"words": " ".join(x)} if change["kind"] == "text" else
                     {"name": name(x or y), "shape": (x or y)["shape"], "colour": (x or y)["colour"]})
            drafts.append(which_image(ODD[change["kind"]].format_map(words), t, "odd_image"))
        if change["kind"] in ("moved", "recoloured", "resized"):
            others = [name(o) for o in scenes[t - 1]["objects"] if o["id"] != y["id"]]
            if options := four_options(rng, name(y), others):
                drafts.append(Draft(f"Which shape looks different in image {t} than in all the other images?", options,
                                    {"template": "odd_shape"}))
    if n != 4:
        return drafts
    counts, shown = [_counts(s) for s in scenes], []
    for what in sorted(set().union(*counts)):
        values = [c[what] for c in counts]
        for word, best in (("most", max(values)), ("fewest", min(values))):
            if values.count(best) == 1:
                shown.append(which_image(f"Which image shows the {word} {what}?", values.index(best) + 1, "count"))
    drafts += _some(rng, shown, 2)
    shown = []
    for a, b in itertools.permutations(sorted(every), 2):
        where = [_relation(s, a, b, settings.spatial_gap) for s in scenes]
        for side, phrase in (("left", "to the left of"), ("right", "to the right of"), ("above", "above"),
                             ("below", "below")):
            holds = [k for k, (r, _apart) in enumerate(where) if r == side]
            if len(holds) == 1 and all(side not in apart for k, (_r, apart) in enumerate(where) if k != holds[0]):
                shown.append(which_image(f"In which image is the {a} {phrase} the {b}?", holds[0] + 1, "relation"))
    return drafts + _some(rng, shown, 2)


def _relation(scene: dict, a: str, b: str, gap: float) -> tuple[str | None, set[str]]:
    """How shape a lies relative to shape b: the relation a question may ask about, and every side a is on
    at all (boxes apart along that axis), which rules an image out as a wrong option only when it lacks it."""
    x, y = (next(Thing(name(o), tuple(o["box"]), {}) for o in scene["objects"] if name(o) == n) for n in (a, b))
    apart = {side for side, holds in (("left", x.box[2] <= y.box[0]), ("right", y.box[2] <= x.box[0]),
                                      ("above", x.box[3] <= y.box[1]), ("below", y.box[3] <= x.box[1])) if holds}
    return relation(x, y, gap), apart


def visual_correspondence(scenes: Sequence[dict], rng: random.Random, settings: ImageSetSettings) -> list[Draft]:
    changed, same = [], []
    for (i, a), (j, b) in itertools.permutations(enumerate(scenes, 1), 2):
        after = {o["id"]: o for o in b["objects"]}
        kinds = {subject(c)[1]: c["kind"] for c in differences(a, b) if c["kind"] != "text"}
        for x in a["objects"]:
            y, here = after.get(x["id"]), _region(x, settings.grid_margin)
            if y is None or not here or sum(_region(o, 0) == here for o in a["objects"]) != 1:
                continue  # another shape in the same part of image i: "the one in the {here}" names no single one
            if options := four_options(rng, name(y), [name(o) for o in b["objects"] if o is not y]):
                (changed if x["id"] in kinds else same).append(Draft(
                    f"Which shape in image {j} is the one in the {here} of image {i}?", options, {"template": "which"}))
            # no "where is it now": a move goes far, so a text-only reader picks the region sharing no word
            if kinds.get(x["id"]) == "recoloured":
                options = four_options(rng, y["colour"], [c for c in COLOURS if c != x["colour"]])
                changed.append(Draft(f"The {x['shape']} in the {here} of image {i} is {x['colour']}. "
                                     f"What colour is that {x['shape']} in image {j}?", options, {"template": "colour"}))
    return changed + _some(rng, same, 2)


def framed(scenes: Sequence[dict], marks: Sequence[dict], rng: random.Random) -> list[Draft]:
    """Which shape of each other image is the one framed in image i (a marked set's `marks`; the other
    options: that image's other shapes). The question names nothing: only the frame says which shape."""
    drafts = []
    for mark in marks:
        i = mark["image"]
        for j, scene in enumerate(scenes, 1):
            y = next((o for o in scene["objects"] if o["id"] == mark["object"]), None)
            others = [name(o) for o in scene["objects"] if o is not y]
            if j != i and y and (options := four_options(rng, name(y), others)):
                drafts.append(Draft(f"Which shape in image {j} is the one inside the frame in image {i}?", options,
                                    {"template": "framed"}))
    return drafts


def _region(shape: dict, margin: float) -> str | None:
    """The part of the picture the shape's centre lies in, or None when it is within `margin` of a line."""
    x1, y1, x2, y2 = shape["box"]
    column, row = grid_cell((x1 + x2) / 2, margin), grid_cell((y1 + y2) / 2, margin)
    return None if row is None or column is None else region_name(row, column)


TEMPLATES = {"image_differences": image_differences, "image_comparison": image_comparison,
             "visual_correspondence": visual_correspondence}


def generate(item: ImageSet, dimension: Dimension, settings: ImageSetSettings, seed: int = 0) -> list[Question]:
    """Up to `settings.per_dimension` questions about a scene set; none about a set without scene truth."""
    truth = item.annotations.get("truth") or {}
    scenes = truth.get("scenes")
    if not scenes or len(scenes) != len(item.images):
        return []
    rng = random.Random(stable_hash(seed, item.id, dimension.id))
    if truth.get("marks"):  # a frame is itself a difference between the images: ask only which shape it frames
        drafts = framed(scenes, truth["marks"], rng) if dimension.key == "visual_correspondence" else []
    else:
        drafts = TEMPLATES[dimension.key](scenes, rng, settings)
    return questions_from(drafts, item, dimension, settings, rng, seed, BACKEND, VERSION)


class ImageSetStage(QuestionStage):
    """Template questions over the images of a scene set, from the truth of what each image shows."""

    generator = "image_sets"
    settings_model = ImageSetSettings
    templates, version = TEMPLATES, VERSION

    def process(self, jobs: Sequence[Job], context: runner.StageContext) -> Iterator[tuple[Job, Outcome]]:
        for job in jobs:
            yield job, Outcome(generate(job.item, job.dimension, self.own, self.options.seed))
