"""Scene sets: an oracle scene and changed copies of it, every change recorded exactly, for the questions
over several images (`generators.image_sets`).

A pair is a scene and one changed copy; a set is a scene and two or three copies, each changed in its own
way on its own object. The images come in a random order, so the unchanged scene is not always image 1.
A view set is a scene and one or two new views of it: in each, every shape is somewhere else (another
part of the picture than in the scene), some recoloured (only a shape whose kind, a star say, is alone in
the scene, so a shape is still told by its kind), signs where they were; each view's change is of kind
`view`, listing every shape's `before` and `after`. Nothing in one image says where a shape of another
image went.
A marked pair is a view pair whose image 1 has a frame drawn around one shape, for "where in image 2 is
the shape framed in image 1" (its truth's `marks`); the frame is itself a difference between the
images, so a marked pair is asked about nothing else.
A change is one of `CHANGES`: a shape moved to another part of the picture, recoloured, resized, added or
removed, or a sign's words replaced. Shapes are told apart by colour and shape alone: a scene keeps one
shape of each such pair, and no change makes a second one.

Each image gets an ordinary manifest row; each set a row of its own, `{"images": [names in order],
"truth": ...}`, that `benchsmith ingest` turns into an image set once the images are in. The truth names
the unchanged image (`base`), each change (`changes`: image, kind, object, before, after) and every
image's shapes and signs by id (`scenes`), so questions and their checks read it without the pixels.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from benchsmith.paths import truetype_font
from ingest.scenes import (COLOURS, SHAPES, SIZES, WIDTH, HEIGHT, Scene, Shape, _apart, _unit_box, draw_scene, fits,
                           layout_sign, plan_scene, region_of, scene_words, tight_box, words_like)

CHANGES = ("moved", "recoloured", "resized", "added", "removed", "text")
KINDS = {"pairs": (2,), "sets": (3, 4), "views": (2, 3), "marked": (2,)}  # images per set
VIEW_RECOLOURED = 0.5  # in a new view, the chance that a shape whose kind is alone in its scene is recoloured
MARK_PAD = 9  # px between a framed shape's box and its frame


def _state(shape: Shape) -> dict:
    box = _unit_box(tight_box(shape.shape, shape.box))
    return {"shape": shape.shape, "colour": shape.colour, "size": shape.size, "region": region_of(box)}


def _placed(rng: random.Random, shape: Shape, others: list[Shape], scene: Scene, away_from: str = "") -> Shape | None:
    """`shape` at a random free place (in another region than `away_from`), or None."""
    side = shape.box[2] - shape.box[0]
    for _ in range(300):
        x1, y1 = rng.randint(4, WIDTH - side - 4), rng.randint(4, HEIGHT - side - 4)
        moved = replace(shape, box=(x1, y1, x1 + side, y1 + side))
        if fits(moved, others, [s.box for s in scene.signs]) and _state(moved)["region"] != away_from:
            return moved
    return None


def change(scene: Scene, ids: list[int], kind: str, rng: random.Random, taken: set[tuple[str, str]],
           free: list[int], next_id: int) -> tuple[Scene, list[int], dict] | None:
    """`scene` (whose shapes have `ids`) with one change of `kind` to one of the `free` shapes (or signs),
    the ids of its shapes after it, and the change's record; None when this scene cannot take it."""
    shapes, keep_out = list(scene.shapes), [s.box for s in scene.signs]
    at = rng.choice([i for i, shape_id in enumerate(ids) if shape_id in free] or [None])
    if kind == "text":
        if not scene.signs:
            return None
        sign_at = rng.randrange(len(scene.signs))
        sign = scene.signs[sign_at]
        for _ in range(30):
            words = tuple(words_like(rng, sign.words, avoid=sign.words))
            new = layout_sign(words, sign.font_size, sign.box[0], sign.box[1], truetype_font())
            if new and all(_apart(new.box, s.box) for s in shapes) and all(
                    _apart(new.box, s.box) for i, s in enumerate(scene.signs) if i != sign_at):
                signs = scene.signs[:sign_at] + (new,) + scene.signs[sign_at + 1:]
                return replace(scene, signs=signs), ids, {"kind": kind, "sign": sign_at, "before": list(sign.words),
                                                          "after": list(words)}
        return None
    if kind == "added":
        names = [(c, s) for c in COLOURS for s in SHAPES if (c, s) not in taken]
        colour, shape_name = rng.choice(names)
        size = rng.choice(list(SIZES))
        side = rng.randint(*SIZES[size])
        new = _placed(rng, Shape(shape_name, colour, size, (0, 0, side, side)), shapes, scene)
        if new is None:
            return None
        taken.add((colour, shape_name))
        return (replace(scene, shapes=(*shapes, new)), [*ids, next_id],
                {"kind": kind, "object": next_id, "after": _state(new)})
    if at is None:
        return None
    old, others = shapes[at], shapes[:at] + shapes[at + 1:]
    if kind == "removed":
        if len(others) < 3:
            return None
        return (replace(scene, shapes=tuple(others)), ids[:at] + ids[at + 1:],
                {"kind": kind, "object": ids[at], "before": _state(old)})
    if kind == "moved":
        new = _placed(rng, old, others, scene, away_from=_state(old)["region"])
    elif kind == "recoloured":
        colours = [c for c in COLOURS if (c, old.shape) not in taken]
        new = replace(old, colour=rng.choice(colours)) if colours else None
    else:  # resized: another size class about the same centre
        size = rng.choice([s for s in SIZES if s != old.size])
        side = rng.randint(*SIZES[size])
        x1, y1 = (old.box[0] + old.box[2] - side) // 2, (old.box[1] + old.box[3] - side) // 2
        new = Shape(old.shape, old.colour, size, (x1, y1, x1 + side, y1 + side))
    if new is None or not fits(new, others, keep_out):
        return None
    taken.add((new.colour, new.shape))
    shapes[at] = new
    return replace(scene, shapes=tuple(shapes)), ids, {"kind": kind, "object": ids[at], "before": _state(old),
                                                        "after": _state(new)}


def _views(rng: random.Random, base: Scene, copies: int) -> tuple[list[Scene], list[list[int]], list[dict]] | None:
    """The base and `copies` new views of it (every shape placed again in another part of the picture than
    in the base, some recoloured), or None when the shapes do not fit elsewhere."""
    kinds = Counter(s.shape for s in base.shapes)
    taken = {(s.colour, s.shape) for s in base.shapes}
    ids = list(range(len(base.shapes)))
    scenes, changes = [base], []
    for _ in range(copies):
        placed: list[Shape] = []
        record = []
        for shape_id, old in enumerate(base.shapes):
            new = _placed(rng, old, placed, base, away_from=_state(old)["region"])
            if new is None:
                return None
            if kinds[old.shape] == 1 and rng.random() < VIEW_RECOLOURED:
                new = replace(new, colour=rng.choice([c for c in COLOURS if (c, old.shape) not in taken]))
                taken.add((new.colour, new.shape))
            placed.append(new)
            record.append({"object": shape_id, "before": _state(old), "after": _state(new)})
        scenes.append(replace(base, shapes=tuple(placed)))
        changes.append({"kind": "view", "shapes": record})
    return scenes, [ids] * len(scenes), changes


def _bases(seed: int, index: int, kind: str, font_path: Path, words: Sequence[str], sign: bool) -> Iterator[Scene]:
    """Scenes of at least four shapes, one of each colour and shape, with a sign if `sign`."""
    for attempt in range(200):
        scene = plan_scene(f"{kind}:{seed}", f"{index}:{attempt}", font_path, words)
        seen: dict[tuple[str, str], Shape] = {}
        for shape in scene.shapes:
            seen.setdefault((shape.colour, shape.shape), shape)
        if len(seen) >= 4 and (scene.signs or not sign):
            yield replace(scene, shapes=tuple(seen.values()))


def _changed(rng: random.Random, base: Scene, planned: list[str]) -> tuple[list[Scene], list[list[int]], list[dict]] | None:
    """The base and a copy of it with each planned change (scenes, their shapes' ids, the changes), or None
    when one of them does not fit this base."""
    base_ids = list(range(len(base.shapes)))
    taken = {(s.colour, s.shape) for s in base.shapes}
    free, next_id = list(base_ids), len(base_ids)
    scenes, objects, changes = [base], [base_ids], []
    for kind_of_change in planned:
        changed = next(filter(None, (change(base, base_ids, kind_of_change, rng, taken, free, next_id)
                                     for _ in range(50))), None)
        if changed is None:
            return None
        scene, ids, record = changed
        if "object" in record:
            free = [i for i in free if i != record["object"]]
            next_id += record["kind"] == "added"
        scenes.append(scene)
        objects.append(ids)
        changes.append(record)
    return scenes, objects, changes


def plan_set(seed: int, index: int, kind: str, font_path: Path, words: Sequence[str]) -> tuple[list[Scene], dict]:
    """The scenes of set (seed, index), in order, and the set's truth."""
    rng = random.Random(f"set:{seed}:{index}:{kind}")
    # Consecutive kinds from a random start: every kind is as likely as any other (a text-only reader
    # would learn the kinds that happen more often), and no set changes a sign twice, so a sign's old
    # words name it in every image.
    start, size = rng.randrange(len(CHANGES)), rng.choice(KINDS[kind])
    planned = [CHANGES[(start + k) % len(CHANGES)] for k in range(size - 1)]
    views = kind in ("views", "marked")
    for base in _bases(seed, index, kind, font_path, words, sign="text" in planned and not views):
        made = _views(rng, base, size - 1) if views else _changed(rng, base, planned)
        if made is None:
            continue
        scenes, objects, changes = made
        order = rng.sample(range(len(scenes)), len(scenes))
        if kind != "marked":
            marks = []
            break
        # a frame in image 1 around a shape image 2 shows too; no shape clear of the others: the next base
        if framed := _mark(rng, scenes[order[0]], objects[order[0]], set(objects[order[1]])):
            shape_id, frame = framed
            scenes[order[0]] = replace(scenes[order[0]], frames=(frame,))
            marks = [{"image": 1, "object": shape_id, "box": list(_unit_box(frame))}]
            break
    else:
        raise RuntimeError(f"no scene for set {seed}:{index} takes the changes {planned}")
    truth = {"kind": kind, "base": order.index(0) + 1,
             "changes": [c | {"image": order.index(i) + 1} for i, c in enumerate(changes, 1)],
             "scenes": [{"objects": [{"id": shape_id, **_state(s), "box": list(_unit_box(tight_box(s.shape, s.box)))}
                                     for shape_id, s in zip(objects[i], scenes[i].shapes)],
                         "signs": [list(sign.words) for sign in scenes[i].signs]} for i in order]} | (
        {"marks": marks} if marks else {})
    return [scenes[i] for i in order], truth


def _frame(shape: Shape) -> tuple[int, int, int, int]:
    x1, y1, x2, y2 = tight_box(shape.shape, shape.box)
    return (x1 - MARK_PAD, y1 - MARK_PAD, x2 + MARK_PAD, y2 + MARK_PAD)


def _mark(rng: random.Random, scene: Scene, ids: list[int], also_in: set[int]) -> tuple[int, tuple] | None:
    """A shape of `scene` that the other image shows too, with a frame around it inside the picture and
    clear of every other shape and sign, so it frames that shape alone: (its id, the frame's pixel box);
    None if no shape has room for one."""
    clear = [(shape_id, frame) for shape_id, shape in zip(ids, scene.shapes) if shape_id in also_in
             for frame in [_frame(shape)]
             if frame[0] >= 0 and frame[1] >= 0 and frame[2] <= WIDTH and frame[3] <= HEIGHT
             and all(_apart(frame, tight_box(o.shape, o.box)) for o in scene.shapes if o is not shape)
             and all(_apart(frame, sign.box) for sign in scene.signs)]
    return rng.choice(clear) if clear else None


def make_sets(out_dir: Path, n: int, kind: str = "pairs", seed: int = 0, progress=None) -> Path:
    """Render n sets of `kind` (pairs, sets, views, marked) into out_dir: the images' manifest rows, then one row per set;
    return the manifest's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    font_path, words = truetype_font(), scene_words()
    manifest = out_dir / "manifest.jsonl"
    set_rows = []
    with manifest.open("w", encoding="utf-8") as handle:
        for index in range(n):
            scenes, truth = plan_set(seed, index, kind, font_path, words)
            names = []
            for position, scene in enumerate(scenes, 1):
                img, row = draw_scene(scene, font_path, seed, index)
                names.append(f"set_{kind}_{seed}_{index:05d}_{position}.png")
                img.save(out_dir / names[-1], "PNG")
                handle.write(json.dumps({"path": names[-1], "source": "benchsmith-oracle", "license": "CC0-1.0"}
                                        | row) + "\n")
            set_rows.append({"images": names, "source": "benchsmith-oracle", "license": "CC0-1.0", "truth": truth})
            if progress:
                progress(1)
        for row in set_rows:
            handle.write(json.dumps(row) + "\n")
    return manifest
