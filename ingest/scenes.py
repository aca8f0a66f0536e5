"""Synthetic oracle scenes: rendered images whose every fact is known exactly.

Each scene holds 2-9 coloured shapes of three sizes at known positions (some overlapping, none hidden)
and 0-2 signs with words drawn in a real TrueType font. The manifest written beside the images carries
the exact truth, in the same format `benchsmith ingest` reads, so the oracle enters the pipeline like
any annotated collection and later stages can be scored against it.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from benchsmith.paths import DATA_DIR, truetype_font
from benchsmith.records import stable_hash

WIDTH, HEIGHT = 640, 480
SHAPES = ("circle", "square", "triangle", "star", "hexagon", "diamond")
COLOURS = {
    "red": (220, 40, 40), "green": (40, 160, 60), "blue": (40, 80, 220), "yellow": (240, 210, 40),
    "orange": (245, 140, 30), "purple": (140, 60, 180), "black": (20, 20, 20), "pink": (240, 120, 190),
}
SIZES = {"small": (34, 46), "medium": (62, 80), "large": (100, 124)}  # side of the bounding square, px
BACKGROUNDS = {"light grey": (225, 225, 225), "pale blue": (214, 230, 245), "cream": (245, 238, 220),
               "pale green": (220, 240, 220)}
MAX_OVERLAP = 0.25  # a later shape may cover at most this share of an earlier one's box


@dataclass(frozen=True)
class Shape:
    shape: str
    colour: str
    size: str
    box: tuple[int, int, int, int]  # pixel xyxy


@dataclass(frozen=True)
class Sign:
    words: tuple[str, ...]
    font_size: int
    box: tuple[int, int, int, int]
    lines: tuple[tuple[str, tuple[int, int, int, int]], ...]  # each line's text and pixel box


@lru_cache(maxsize=1)
def scene_words() -> tuple[str, ...]:
    """The words signs are written with (data/scene_words.txt), read once per process."""
    lines = (DATA_DIR / "scene_words.txt").read_text(encoding="utf-8").splitlines()
    return tuple(w.strip() for w in lines if w.strip() and not w.startswith("#"))


def words_like(rng: random.Random, like: Sequence[str], avoid: Sequence[str]) -> list[str]:
    """A scene word for each of `like`, of the same length where one is left, none in `avoid` or twice. A
    changed sign's new words are drawn this way, so their width fits where the old ones stood; its other
    options are drawn the same way, or a text-only reader would learn that the words that fit run short."""
    pool, out = [w for w in scene_words() if w not in avoid], []
    for word in like:
        left = [w for w in pool if w not in out]
        out.append(rng.choice([w for w in left if len(w) == len(word)] or left))
    return out


def _polygon(shape: str, box: tuple[int, int, int, int]) -> list[tuple[float, float]]:
    x1, y1, x2, y2 = box
    cx, cy, r = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) / 2
    if shape == "triangle":
        return [(cx, y1), (x2, y2), (x1, y2)]
    if shape == "diamond":
        return [(cx, y1), (x2, cy), (cx, y2), (x1, cy)]
    if shape == "hexagon":
        return [(cx + r * math.cos(math.pi / 3 * k), cy + r * math.sin(math.pi / 3 * k)) for k in range(6)]
    if shape == "star":
        return [(cx + (r if k % 2 == 0 else r * 0.45) * math.cos(math.pi / 5 * k - math.pi / 2),
                 cy + (r if k % 2 == 0 else r * 0.45) * math.sin(math.pi / 5 * k - math.pi / 2)) for k in range(10)]
    raise ValueError(shape)


def tight_box(shape: str, box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """The pixel box the drawn shape actually fills (a hexagon or star is shorter than its square)."""
    if shape in ("circle", "square"):
        return box
    xs, ys = zip(*_polygon(shape, box))
    return (math.floor(min(xs)), math.floor(min(ys)), math.ceil(max(xs)), math.ceil(max(ys)))


def _overlap_share(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> float:
    """Share of a's area covered by b."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    return (w * h) / ((a[2] - a[0]) * (a[3] - a[1]))


SIGN_PAD = 14  # px between a sign's border and its words


def _measure_sign(words: Sequence[str], size: int, font_path: Path) -> tuple[list, int, int]:
    """Each word's ink box in the font at `size` (from its origin), and the width and height of a sign of them."""
    font = ImageFont.truetype(str(font_path), size)
    ink = [font.getbbox(word) for word in words]
    return ink, max(b[2] - b[0] for b in ink) + 2 * SIGN_PAD, (size + 8) * len(words) + 2 * SIGN_PAD - 8


def layout_sign(words: tuple[str, ...], size: int, x1: int, y1: int, font_path: Path) -> Sign | None:
    """A sign with these words at this top-left corner, each line's box measured in the font; None when
    it would not fit the frame."""
    ink, width, height = _measure_sign(words, size, font_path)
    if x1 < 10 or y1 < 10 or x1 + width > WIDTH - 10 or y1 + height > HEIGHT - 10:
        return None
    tops = [y1 + SIGN_PAD + i * (size + 8) for i in range(len(words))]
    lines = tuple((word, (x1 + SIGN_PAD, top, x1 + SIGN_PAD + b[2] - b[0], top + b[3] - b[1]))
                  for word, b, top in zip(words, ink, tops))
    return Sign(words, size, (x1, y1, x1 + width, y1 + height), lines)


def _place_signs(rng: random.Random, words: Sequence[str], font_path: Path, n: int) -> list[Sign]:
    signs: list[Sign] = []
    for _ in range(n):
        for _attempt in range(50):
            chosen = tuple(rng.sample(words, rng.choice((1, 1, 2))))
            size = rng.randint(30, 38)
            _ink, width, height = _measure_sign(chosen, size, font_path)
            if width > WIDTH - 20:
                continue
            sign = layout_sign(chosen, size, rng.randint(10, WIDTH - width - 10), rng.randint(10, HEIGHT - height - 10),
                               font_path)
            if sign is None or not all(_apart(sign.box, s.box) for s in signs):
                continue
            signs.append(sign)
            break
    return signs


def _apart(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return _overlap_share(a, b) == 0 and _overlap_share(b, a) == 0


def fits(shape: Shape, shapes: Sequence[Shape], keep_out: Sequence[tuple[int, int, int, int]]) -> bool:
    """Whether `shape` may join `shapes` inside the frame: clear of `keep_out` (signs), covering no more than
    MAX_OVERLAP of another shape (nor covered more), and overlapping only shapes of other colours, so every
    outline stays visible."""
    x1, y1, x2, y2 = shape.box
    if x1 < 4 or y1 < 4 or x2 > WIDTH - 4 or y2 > HEIGHT - 4 or not all(_apart(shape.box, k) for k in keep_out):
        return False
    return not any(_overlap_share(s.box, shape.box) > MAX_OVERLAP or _overlap_share(shape.box, s.box) > MAX_OVERLAP
                   or (s.colour == shape.colour and not _apart(s.box, shape.box)) for s in shapes)


def _place_shapes(rng: random.Random, n: int, keep_out: list[tuple[int, int, int, int]]) -> list[Shape]:
    shapes: list[Shape] = []
    for _attempt in range(2000):
        if len(shapes) == n:
            break
        size_name = rng.choice(list(SIZES))
        side = rng.randint(*SIZES[size_name])
        x1, y1 = rng.randint(4, WIDTH - side - 4), rng.randint(4, HEIGHT - side - 4)
        box = (x1, y1, x1 + side, y1 + side)
        if not fits(Shape("", "", size_name, box), shapes, keep_out):
            continue
        colour = rng.choice(list(COLOURS))
        if not fits(Shape("", colour, size_name, box), shapes, keep_out):
            continue
        shapes.append(Shape(rng.choice(SHAPES), colour, size_name, box))
    return shapes


REGIONS = (("top left", "top centre", "top right"),
           ("middle left", "centre", "middle right"),
           ("bottom left", "bottom centre", "bottom right"))


def region_of(box: tuple[float, float, float, float]) -> str:
    """Where a normalised box's centre lies on a 3x3 grid, in words."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return REGIONS[min(int(cy * 3), 2)][min(int(cx * 3), 2)]


NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _caption(background: str, shapes: list[Shape], signs: list[Sign]) -> str:
    counts = Counter(s.shape for s in shapes)
    parts = [f"{NUMBER_WORDS[n]} {shape}{'s' if n > 1 else ''}" for shape, n in sorted(counts.items())]
    described = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    return " ".join([f"A drawing on a {background} background with {described}.",
                     *(f"A {s.size} {s.colour} {s.shape} sits in the {region_of(_unit_box(s.box))} of the picture."
                       for s in shapes),
                     *(f"A white sign with a dark border reads \"{' '.join(sign.words)}\"." for sign in signs)])


def _unit_box(box: tuple[int, int, int, int]) -> tuple[float, float, float, float]:
    return (round(box[0] / WIDTH, 4), round(box[1] / HEIGHT, 4), round(box[2] / WIDTH, 4), round(box[3] / HEIGHT, 4))


@dataclass(frozen=True)
class Scene:
    """What a scene draws: a spec that can be drawn, changed (`ingest.scene_sets`) and drawn again."""

    background: str
    signs: tuple[Sign, ...]
    shapes: tuple[Shape, ...]
    frames: tuple[tuple[int, int, int, int], ...] = ()  # pixel boxes framing a shape (a marked scene set)


def plan_scene(seed: int | str, index: int | str, font_path: Path, words: Sequence[str]) -> Scene:
    """The scene (seed, index) always gives."""
    rng = random.Random(f"{seed}:{index}")
    background = rng.choice(list(BACKGROUNDS))
    signs = _place_signs(rng, words, font_path, rng.choice((0, 1, 1, 2)))
    shapes = _place_shapes(rng, rng.randint(2, 9), [s.box for s in signs])
    return Scene(background, tuple(signs), tuple(shapes))


def draw_scene(scene: Scene, font_path: Path, seed: int, index: int) -> tuple[Image.Image, dict]:
    """The scene's pixels and its manifest row (`seed` and `index` are recorded in its truth)."""
    img = Image.new("RGB", (WIDTH, HEIGHT), BACKGROUNDS[scene.background])
    draw = ImageDraw.Draw(img)
    for sign in scene.signs:
        draw.rectangle(sign.box, fill=(255, 255, 255), outline=(40, 40, 40), width=3)
        font = ImageFont.truetype(str(font_path), sign.font_size)
        for text, (x1, y1, _x2, _y2) in sign.lines:
            left, top = font.getbbox(text)[:2]
            draw.text((x1 - left, y1 - top), text, fill=(15, 15, 15), font=font)
    for s in scene.shapes:
        style = {"fill": COLOURS[s.colour], "outline": (0, 0, 0), "width": 2}
        if s.shape in ("circle", "square"):
            (draw.ellipse if s.shape == "circle" else draw.rectangle)(s.box, **style)
        else:
            draw.polygon(_polygon(s.shape, s.box), **style)
    for x1, y1, x2, y2 in scene.frames:  # black with a white line inside: it shows on any background and shape
        draw.rectangle((x1, y1, x2, y2), outline=(0, 0, 0), width=5)
        draw.rectangle((x1 + 2, y1 + 2, x2 - 2, y2 - 2), outline=(255, 255, 255), width=1)
    shapes, signs = scene.shapes, scene.signs
    objects = [{"label": s.shape, "box": list(_unit_box(tight_box(s.shape, s.box))),
                "attributes": {"colour": s.colour, "shape": s.shape, "size": s.size}} for s in shapes]
    ocr = [{"text": text, "box": list(_unit_box(box))} for sign in signs for text, box in sign.lines]
    truth = {
        "seed": seed, "index": index, "background": scene.background,
        "counts": dict(sorted(Counter(s.shape for s in shapes).items())),
        "colour_counts": dict(sorted(Counter(s.colour for s in shapes).items())),
        "signs": [{"words": list(sign.words), "box": list(_unit_box(sign.box))} for sign in signs],
        "words": [text for sign in signs for text, _ in sign.lines],
    } | ({"frames": [list(_unit_box(box)) for box in scene.frames]} if scene.frames else {})
    row = {"captions": [_caption(scene.background, shapes, signs)], "objects": objects, "ocr": ocr, "truth": truth}
    return img, row


def render_scene(seed: int, index: int, font_path: Path, words: Sequence[str]) -> tuple[Image.Image, dict]:
    """One scene and its manifest row. The same (seed, index) always gives the same pixels and truth."""
    return draw_scene(plan_scene(seed, index, font_path, words), font_path, seed, index)


def scenes_key(n: int, seed: int) -> str:
    """What decides the scenes `make_scenes` renders: their count, their seed and the renderer's settings."""
    return stable_hash(n, seed, WIDTH, HEIGHT, SHAPES, COLOURS, SIZES, BACKGROUNDS, MAX_OVERLAP, scene_words())


def make_scenes(out_dir: Path, n: int, seed: int = 0, progress=None) -> Path:
    """Render n scenes into out_dir with manifest.jsonl; return the manifest path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    font_path, words = truetype_font(), scene_words()
    manifest = out_dir / "manifest.jsonl"
    with manifest.open("w", encoding="utf-8") as handle:
        for index in range(n):
            img, row = render_scene(seed, index, font_path, words)
            name = f"scene_{seed}_{index:05d}.png"
            img.save(out_dir / name, "PNG")
            handle.write(json.dumps({"path": name, "source": "benchsmith-oracle", "license": "CC0-1.0"} | row) + "\n")
            if progress:
                progress(1)
    return manifest
