"""Exact questions over the images of a scene set (`ingest.scene_sets`): the `multi_image` dimensions.

A set's truth lists every image's shapes (by id, with colour, shape, size and box) and signs, so what
differs between any two images is worked out here (`differences`), not read from the recorded changes;
the tests check the keys against those. Shapes are named by colour and shape, which pick out one in a set.

Every question must need several of the set's images: each option is one that no member image alone
rules out (`ruled_out`), except the wrong ones that some image does, as long as no image rules out all of
them. A draft one image answers anyway, or whose key another question of the set states in its text,
comes as a dropped question with the reason (rules `one_image_answers`, `key_in_sibling`).

- Image Differences: what changed between image i and image j, when one shape moved or was resized (the
  other options: moves and resizes that did not happen to shapes the same in both, which neither image
  can rule out; a change of another kind is not asked this way, since one image rules out its decoys);
  which shape moved or changed size (the others: shapes the same in both), which changed colour (by its
  kind alone, "the star": by its colour, image j would not show it), which is in one image and not the
  other (the others: shapes both show, and shapes neither shows), also between two changed copies; what
  a changed sign now reads (the others: the set's other signs first).
- Image Comparison: which shape is in every image (the others: shapes some images show, so that each
  image shows one of them too, then shapes in none); with four images, which one shows a shape moved,
  recoloured or resized, a shape more or fewer, or a sign reading otherwise (nothing named: a name would
  give away another question's key), which shows the most or the fewest shapes of a kind, in which one a
  relation between two shapes holds; with three or more, which shape looks different in one image.
- Visual Correspondence, mostly over view sets (every shape moved, some recoloured): in which part of
  image j is the shape that is alone in a part of image i (the other options: parts of image j that hold
  other shapes, never the part named), and, when it changed colour, which colour it is in image j (the
  others: colours of image j's other shapes, never its colour in image i); in a marked pair, in which
  part of image 2 is the shape inside the frame drawn in image 1. Never which shape of image j it is:
  image i names it (a shape keeps its name unless recoloured, and its kind always).

Every draft has its key first; the quality gate, the letter balance and the blind filter then treat them
like any other question.
"""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace

from pydantic import Field

from benchsmith import runner
from benchsmith.dimensions import Dimension, registry
from benchsmith.records import ImageSet, Question, stable_hash
from benchsmith.settings import Strict
from generators.programmatic import Draft, Thing, four_options, grid_cell, questions_from, region_name, relation
from generators.stage import Job, Outcome, QuestionStage
from ingest.scenes import COLOURS, SHAPES, SIZES, words_like

BACKEND = "image_sets"
# v2: no sign in "what changed", distractors drawn at random, correspondence about unchanged shapes too;
# v3: "which shape" also between two changed copies, up to 10 questions a set and dimension; marked pairs;
# v4: drafts one image answers, or whose key a sibling states, dropped; where/colour over new views
VERSION = "image-sets-v4"


class ImageSetSettings(Strict):
    per_dimension: int = Field(10, ge=1)      # at most this many questions per set and dimension
    grid_margin: float = Field(0.04, ge=0)    # a centre this close to a grid line (or the part asked) has no clear one
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
    """A move or a resize of a shape in words, as an option of 'what changed'."""
    x, y = change["before"], change["after"]
    if change["kind"] == "resized":
        bigger = list(SIZES).index(y["size"]) > list(SIZES).index(x["size"])
        return f"The {name(x)} got {'bigger' if bigger else 'smaller'}"
    return f"The {name(x)} moved"


def _absent(rng: random.Random, scenes: Sequence[dict]) -> dict:
    """A colour and shape no image of the set shows."""
    shown = {name(o) for s in scenes for o in s["objects"]}
    return rng.choice([{"colour": c, "shape": s, "size": "medium"} for c in COLOURS for s in SHAPES
                       if f"{c} {s}" not in shown])


def _unchanged(a: dict, b: dict) -> list[dict]:
    """The shapes of a that b shows the same."""
    after = {o["id"]: o for o in b["objects"]}
    return [o for o in a["objects"] if after.get(o["id"]) == o]


WHICH = {"moved": "Which shape moved between image {i} and image {j}?",
         "recoloured": "Which shape changed colour between image {i} and image {j}?",
         "resized": "Which shape changed size between image {i} and image {j}?",
         "removed": "Which shape is in image {i} but not in image {j}?",
         "added": "Which shape is in image {j} but not in image {i}?"}


def _names(scene: dict) -> set[str]:
    return {name(o) for o in scene["objects"]}


def _alone(scene: dict) -> set[str]:
    """The kinds of shape (star, circle) that the scene shows once."""
    kinds = Counter(o["shape"] for o in scene["objects"])
    return {k for k, n in kinds.items() if n == 1}


def _decoys(rng: random.Random, still: list[dict], key: dict) -> list[dict] | None:
    """Three moves or resizes that did not happen to unchanged shapes, so that the four options are two
    moves, one shape that got bigger and one that got smaller whichever the key is (each is the key as
    often as the others are). Only a medium shape is said to get bigger or smaller: "the small star got
    bigger" is ruled out by the later image, which shows it small."""
    order = list(SIZES)
    grew = key["kind"] == "resized" and order.index(key["after"]["size"]) > order.index(key["before"]["size"])
    sizes = ["large", "small"] if key["kind"] == "moved" else ["small" if grew else "large"]
    resizes = len(sizes)
    medium = [o for o in still if o["size"] == "medium"]
    if len(medium) < resizes:
        return None
    resized = rng.sample(medium, resizes)
    rest = [o for o in still if o not in resized]
    if len(rest) < 3 - resizes:
        return None
    return ([{"kind": "resized", "before": o, "after": o | {"size": size}} for o, size in zip(resized, sizes)]
            + [{"kind": "moved", "before": o, "after": o} for o in rng.sample(rest, 3 - resizes)])


def _in_one_not_other(rng: random.Random, key: str, both: list[str], absent: list[str]) -> tuple | None:
    """Options for "which shape is in image a but not in image b": the key, one or two shapes both images
    show (image a alone cannot rule them out) and the rest shown by neither (nor can image b)."""
    shown = rng.choice((1, 2))
    picked = rng.sample(both, min(shown, len(both))) if both else []
    picked += rng.sample(absent, 3 - len(picked))
    return (key, *picked) if len(set(picked)) == 3 and key not in picked else None


def image_differences(scenes: Sequence[dict], rng: random.Random, _settings: ImageSetSettings) -> list[Draft]:
    drafts = []
    everywhere = set().union(*map(_names, scenes))
    absent = sorted(f"{c} {s}" for c in COLOURS for s in SHAPES if f"{c} {s}" not in everywhere)
    signs = sorted({" ".join(w) for s in scenes for w in s["signs"]})
    for (i, a), (j, b) in itertools.combinations(enumerate(scenes, 1), 2):
        found, still = differences(a, b), _unchanged(a, b)
        if len(found) == 1 and found[0]["kind"] == "text":
            old, new = found[0]["before"], found[0]["after"]
            # the other options are written on the set's other signs of as many words where there are any
            # (image j alone rules out words it does not show), then words of the same lengths
            written = [w for w in signs if w not in (" ".join(old), " ".join(new)) and len(w.split()) == len(new)]
            picked = rng.sample(written, min(3, len(written)))
            picked += [w for w in (" ".join(words_like(rng, new, avoid=old + new)) for _ in range(6))
                       if w not in picked][:3 - len(picked)]
            if len(set(picked)) == 3:
                options = (" ".join(new), *picked)
                drafts.append(Draft(f"The sign that reads \"{' '.join(old)}\" in image {i}: what does it read in "
                                    f"image {j}?", options, {"template": "sign_text"}))
        elif len(found) == 1 and found[0]["kind"] in ("moved", "resized"):
            # Only moves and resizes: one image alone rules out a shape that appeared (image i shows it), one
            # that disappeared or changed colour (image j shows it as it was), so decoys of those kinds are
            # never asked, and a key of those kinds would be the one option of its kind.
            if fakes := _decoys(rng, still, found[0]):
                drafts.append(Draft(f"What changed between image {i} and image {j}?",
                                    (sentence(found[0]), *map(sentence, fakes)), {"template": "what_changed"}))
        kinds_found = Counter(c["kind"] for c in found)
        both = sorted(_names(a) & _names(b))
        for change in (c for c in found if c["kind"] != "text" and kinds_found[c["kind"]] == 1):
            kind, shape = change["kind"], change["before"] or change["after"]
            if kind in ("moved", "resized"):  # the others: shapes the same in both images
                options = four_options(rng, name(shape), map(name, still))
            elif kind == "recoloured":  # named by kind alone: by colour, image j would not show the key
                alone = _alone(a) & _alone(b)  # the others: shapes of both the same colour (in a view, moved)
                options = shape["shape"] in alone and four_options(
                    rng, f"the {shape['shape']}", [f"the {o['shape']}" for o in a["objects"]
                                                   if name(o) in both and o["shape"] in alone])
            else:
                options = _in_one_not_other(rng, name(shape), [n for n in both if n != name(shape)], absent)
            if options:
                drafts.append(Draft(WHICH[kind].format(i=i, j=j), options, {"template": "which_shape"}))
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


# the changed shape or sign unnamed: a name here would tell another question of the set its key
ODD = {"moved": "Which image shows a shape in another place than all the other images do?",
       "recoloured": "Which image shows a shape in another colour than all the other images do?",
       "resized": "Which image shows a shape at another size than all the other images do?",
       "removed": "Which image shows fewer shapes than each of the other images?",
       "added": "Which image shows more shapes than each of the other images?",
       "text": "Which image shows a sign that reads otherwise than in all the other images?"}


def _counts(scene: dict) -> Counter:
    things = scene["objects"]
    # no count of all the shapes: "more (fewer) shapes than each of the other images" asks it
    return Counter(f"{o['colour']} shapes" for o in things) + Counter(
        f"{o['shape']}s" for o in things)


def image_comparison(scenes: Sequence[dict], rng: random.Random, settings: ImageSetSettings) -> list[Draft]:
    n, drafts, shown = len(scenes), [], []
    every = set.intersection(*map(_names, scenes))
    names: dict[int, set[str]] = {}
    for o in (o for s in scenes for o in s["objects"]):
        names.setdefault(o["id"], set()).add(name(o))
    # one name per shape: a recoloured shape's two names would share a word that the key never shares
    some = [rng.choice(sorted(n)) for _id, n in sorted(names.items()) if not n & every]
    for key in sorted(every):
        # each image keeps a decoy it shows too (one that some images only show), or it alone would answer
        picked: list[str] = []
        for scene in rng.sample(scenes, n):
            if not _names(scene) & set(picked) and (mine := sorted(_names(scene) & set(some))):
                picked.append(rng.choice(mine))
        rest = [o for o in some if o not in picked]
        picked += rng.sample(rest, min(len(rest), max(0, 3 - len(picked))))
        while len(picked) < 3:
            if (decoy := name(_absent(rng, scenes))) not in picked:
                picked.append(decoy)
        if len(picked) == 3:
            shown.append(Draft("Which shape is in every image?" if n > 2 else "Which shape is in both images?",
                               (key, *picked), {"template": "in_every_image"}))
    drafts += _some(rng, shown, 1)
    images = [f"image {k}" for k in range(1, n + 1)]

    def which_image(text: str, t: int, template: str) -> Draft:
        return Draft(text, (images[t - 1], *(m for m in images if m != images[t - 1])), {"template": template})

    for t, change in _odd_images(scenes) if n >= 3 else ():
        x, y = change["before"], change["after"]
        if n == 4:
            drafts.append(which_image(ODD[change["kind"]], t, "odd_image"))
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


def _clear(x: dict, scene: dict, margin: float) -> str | None:
    """The part of the picture x's centre lies in, when it is `margin` from every grid line and no other
    shape's centre comes within `margin` of that part (or "the shape in the top left" would name two)."""
    here = _region(x, margin)
    if here is None:
        return None
    for o in scene["objects"]:
        x1, y1, x2, y2 = o["box"]
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        near = {region_name(grid_cell(min(max(cy + dy, 0), 1), 0), grid_cell(min(max(cx + dx, 0), 1), 0))
                for dx in (-margin, 0, margin) for dy in (-margin, 0, margin)}
        if o is not x and here in near:
            return None
    return here


def _where(rng: random.Random, y: dict, b: dict, away: str, margin: float) -> tuple | None:
    """Options for where in image b shape y is: its part and the parts of three other shapes of b (each
    shows a shape, so image b alone rules none out), never `away`, the part the question names."""
    there = _region(y, margin)
    others = {r for o in b["objects"] if o is not y and (r := _region(o, 0))} - {there, away}
    return there and there != away and four_options(rng, there, sorted(others))


def visual_correspondence(scenes: Sequence[dict], rng: random.Random, settings: ImageSetSettings) -> list[Draft]:
    """Where in image j the shape in a part of image i is, when it is somewhere else there; which colour it
    is in image j, when it changed colour. Never which shape of image j it is: image i names it (a shape
    keeps its name unless recoloured, and its kind always)."""
    drafts = []
    for (i, a), (j, b) in itertools.permutations(enumerate(scenes, 1), 2):
        after = {o["id"]: o for o in b["objects"]}
        for x in a["objects"]:
            y, here = after.get(x["id"]), _clear(x, a, settings.grid_margin)
            if y is None or not here or (name(y) != name(x) and x["shape"] not in _alone(a) & _alone(b)):
                continue  # recoloured, and another shape of its kind in one image: which one it is is unclear
            the_one = f"the shape that is in the {here} of image {i}"
            if options := _where(rng, y, b, here, settings.grid_margin):
                drafts.append(Draft(f"In which part of image {j} is {the_one}?", options, {"template": "where"}))
            if y["colour"] != x["colour"] and (options := four_options(
                    rng, y["colour"], sorted({o["colour"] for o in b["objects"] if o is not y} - {x["colour"]}))):
                drafts.append(Draft(f"In image {j}, what colour is {the_one}?", options, {"template": "colour"}))
    return drafts


def framed(scenes: Sequence[dict], marks: Sequence[dict], rng: random.Random,
           settings: ImageSetSettings) -> list[Draft]:
    """Where in each other image is the shape framed in image i (a marked set's `marks`): the question names
    nothing, only the frame says which shape; the options are parts of that image holding a shape."""
    drafts = []
    for mark in marks:
        i = mark["image"]
        x = next(o for o in scenes[i - 1]["objects"] if o["id"] == mark["object"])
        for j, scene in enumerate(scenes, 1):
            y = next((o for o in scene["objects"] if o["id"] == mark["object"]), None)
            if j != i and y and (options := _where(rng, y, scene, _region(x, 0), settings.grid_margin)):
                drafts.append(Draft(f"In which part of image {j} is the shape inside the frame in image {i}?",
                                    options, {"template": "framed"}))
    return drafts


def _region(shape: dict, margin: float) -> str | None:
    """The part of the picture the shape's centre lies in, or None when it is within `margin` of a line."""
    x1, y1, x2, y2 = shape["box"]
    column, row = grid_cell((x1 + x2) / 2, margin), grid_cell((y1 + y2) / 2, margin)
    return None if row is None or column is None else region_name(row, column)


# -- What one image alone rules out -------------------------------------------------------------------
#
# A question over a set must need several of its images. `ruled_out` reads one member image's truth with the
# question, as a reader who sees that image alone would: which options does that image contradict? It
# knows what every set keeps: a colour and a shape name one shape in every image of a set, a shape keeps
# its kind (star, circle) whatever else changes. When one image rules out every option but the key, one
# image answers the question, and the generator drops it (`one_image_answers`); the tests hold every kept
# question to the same function.

SIDES = {"to the left of": lambda a, b: a[2] <= b[0], "to the right of": lambda a, b: b[2] <= a[0],
         "above": lambda a, b: a[3] <= b[1], "below": lambda a, b: b[3] <= a[1]}


def members(truth: dict) -> list[dict]:
    """Each member image's truth: its shapes and signs (`scenes`), and the frames drawn in it (`marks`)."""
    frames = [[m["box"] for m in truth.get("marks", []) if m["image"] == k] for k in range(1, len(truth["scenes"]) + 1)]
    return [scene | {"frames": f} for scene, f in zip(truth["scenes"], frames)]


def _referent(member: dict, where: str) -> dict | None:
    """The one shape of an image in a part of it ("top left"), or inside its frame ("inside the frame")."""
    if where == "inside the frame":
        held = [o for o in member["objects"] for f in member["frames"]
                if f[0] <= o["box"][0] and f[1] <= o["box"][1] and o["box"][2] <= f[2] and o["box"][3] <= f[3]]
    else:
        held = [o for o in member["objects"] if _region(o, 0) == where]
    return held[0] if len(held) == 1 else None


def _change_contradicted(option: str, earlier: bool, shapes: dict[str, dict]) -> bool:
    """Whether the earlier (or the later) image of two contradicts an option of "what changed"."""
    sizes = list(SIZES)
    if m := re.fullmatch(r"An? (.+) appeared", option):
        return (m[1] in shapes) == earlier
    if m := re.fullmatch(r"The (\w+) (\w+) turned (\w+)", option):
        was, now = f"{m[1]} {m[2]}", f"{m[3]} {m[2]}"
        return (was not in shapes or now in shapes) if earlier else (now not in shapes or was in shapes)
    if m := re.fullmatch(r"The (.+) got (bigger|smaller)", option):
        shape = shapes.get(m[1])
        edge = sizes[-1 if (m[2] == "bigger") == earlier else 0]
        return shape is None or shape["size"] == edge
    if m := re.fullmatch(r"The (.+) moved", option):
        return m[1] not in shapes
    if m := re.fullmatch(r"The (.+) disappeared", option):
        return (m[1] not in shapes) == earlier
    raise ValueError(f"not a change: {option!r}")


def ruled_out(text: str, options: Sequence[str], k: int, member: dict) -> set[str]:
    """The options that image k (`member`: its truth, `members`) rules out on its own, for a question of
    this module."""
    shapes = {name(o): o for o in member["objects"]}
    kinds = Counter(o["shape"] for o in member["objects"])
    signs = {" ".join(words) for words in member["signs"]}
    itself = {f"image {k}"} & set(options)

    def ask(pattern: str) -> re.Match | None:
        return re.fullmatch(pattern, text)

    if m := ask(r"What changed between image (\d) and image (\d)\?"):
        i, j = int(m[1]), int(m[2])
        return {o for o in options if _change_contradicted(o, k == i, shapes)} if k in (i, j) else set()
    if m := ask(r"Which shape (moved|changed size|changed colour) between image (\d) and image (\d)\?"):
        if k not in (int(m[2]), int(m[3])):
            return set()
        if m[1] == "changed colour":  # the options name kinds of shape
            return {o for o in options if not kinds[o.removeprefix("the ")]}
        return {o for o in options if o not in shapes}
    if m := ask(r"Which shape is in image (\d) but not in image (\d)\?"):
        with_it, without = int(m[1]), int(m[2])
        return {o for o in options if (k == with_it and o not in shapes) or (k == without and o in shapes)}
    if m := ask(r'The sign that reads "(.+)" in image (\d): what does it read in image (\d)\?'):
        return {o for o in options if o not in signs} if k == int(m[3]) else set()
    if ask(r"Which shape is in (every image|both images)\?"):
        return {o for o in options if o not in shapes}
    if m := ask(r"Which shape looks different in image (\d) than in all the other images\?"):
        return {o for o in options if o not in shapes} if k == int(m[1]) else set()
    # the options are images: one image rules out at most itself
    if m := ask(r"In which image is the (.+) (to the left of|to the right of|above|below) the (.+)\?"):
        one, other = shapes.get(m[1]), shapes.get(m[3])
        return set() if one and other and SIDES[m[2]](one["box"], other["box"]) else itself
    if text in ODD.values() or ask(r"Which image shows the (most|fewest) (.+)\?"):
        return set()  # a comparison with the other images
    if m := (ask(r"In which part of image (\d) is the shape (?:that is )?(in the (.+) of|inside the frame in) "
                 r"image (\d)\?")
             or ask(r"In image (\d), what colour is the shape that is (in the (.+) of) image (\d)\?")):
        j, i, colour = int(m[1]), int(m[4]), text.startswith("In image")
        if k == j:  # options naming a part (a colour) that image j shows no shape in (of)
            shown = {o["colour"] if colour else _region(o, 0) for o in member["objects"]}
            return {o for o in options if o not in shown}
        if k == i and colour and (x := _referent(member, m[3] or "inside the frame")):
            return {o for o in options if f"{o} {x['shape']}" in shapes and f"{o} {x['shape']}" != name(x)}
        return set()
    raise ValueError(f"a question no single-image reading knows: {text!r}")


def one_image_answers(text: str, options: Sequence[str], key: str,
                      images: Sequence[dict]) -> tuple[int, set[str]] | None:
    """The first member image that rules out every option but `key` on its own, and what it rules out."""
    for k, member in enumerate(images, 1):
        if len(out := ruled_out(text, options, k, member)) == len(options) - 1 and key not in out:
            return k, out
    return None


# a key of these kinds says nothing a sibling question's text could give away
UNSTATED = re.compile(r"image \d|(top|middle|bottom) (left|centre|right)|centre|" + "|".join(COLOURS))


def _checked(drafts: list[Draft], sibling_texts: Sequence[str], images: Sequence[dict]) -> list[Draft]:
    """The drafts, those one image answers or whose key another question of the set states dropped with
    the reason."""
    out = []
    for d in drafts:
        key = d.options[0]
        stating = None if UNSTATED.fullmatch(key) else next(
            (t for t in sibling_texts if t != d.text and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", t)), None)
        if stating:
            d = replace(d, dropped=f"another question of the set states the key {key!r}: {stating!r}",
                        rule="key_in_sibling")
        elif found := one_image_answers(d.text, d.options, key, images):
            k, out_ = found
            d = replace(d, dropped=f"image {k} alone answers it: it rules out {', '.join(sorted(out_))}",
                        rule="one_image_answers")
        out.append(d)
    return out


TEMPLATES = {"image_differences": image_differences, "image_comparison": image_comparison,
             "visual_correspondence": visual_correspondence}


def set_drafts(truth: dict, settings: ImageSetSettings, seed: int, item_id: str) -> dict[str, list[Draft]]:
    """Every dimension's drafts about a set, each drawn with its own seed (so the same whichever is asked)."""
    scenes, ids = truth["scenes"], {d.key: d.id for d in registry()}
    out = {}
    for key, template in TEMPLATES.items():
        rng = random.Random(stable_hash(seed, item_id, ids[key], "drafts"))
        if truth.get("marks"):  # a frame is itself a difference between the images: ask only where it went
            out[key] = framed(scenes, truth["marks"], rng, settings) if key == "visual_correspondence" else []
        else:
            out[key] = template(scenes, rng, settings)
    return out


def generate(item: ImageSet, dimension: Dimension, settings: ImageSetSettings, seed: int = 0) -> list[Question]:
    """Up to `settings.per_dimension` questions about a scene set; none about a set without scene truth.
    Drafts one member image answers, or whose key another question of the set states, come dropped."""
    truth = item.annotations.get("truth") or {}
    scenes = truth.get("scenes")
    if not scenes or len(scenes) != len(item.images):
        return []
    every = set_drafts(truth, settings, seed, item.id)
    texts = [d.text for drafts in every.values() for d in drafts]
    drafts = _checked(every[dimension.key], texts, members(truth))
    rng = random.Random(stable_hash(seed, item.id, dimension.id))
    return questions_from(drafts, item, dimension, settings, rng, seed, BACKEND, VERSION)


class ImageSetStage(QuestionStage):
    """Template questions over the images of a scene set, from the truth of what each image shows."""

    generator = "image_sets"
    settings_model = ImageSetSettings
    templates, version = TEMPLATES, VERSION

    def process(self, jobs: Sequence[Job], context: runner.StageContext) -> Iterator[tuple[Job, Outcome]]:
        for job in jobs:
            yield job, Outcome(generate(job.item, job.dimension, self.own, self.options.seed))
