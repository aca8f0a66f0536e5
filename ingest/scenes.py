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
from dataclasses import dataclass
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


def scene_words() -> list[str]:
    lines = (DATA_DIR / "scene_words.txt").read_text(encoding="utf-8").splitlines()
    return [w.strip() for w in lines if w.strip() and not w.startswith("#")]


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


def _place_signs(rng: random.Random, words: list[str], font_path: Path, n: int) -> list[Sign]:
    signs: list[Sign] = []
    for _ in range(n):
        for _attempt in range(50):
            chosen = tuple(rng.sample(words, rng.choice((1, 1, 2))))
            size = rng.randint(30, 38)
            font = ImageFont.truetype(str(font_path), size)
            pad = 14
            line_boxes = [font.getbbox(word) for word in chosen]
            width = max(b[2] - b[0] for b in line_boxes) + 2 * pad
            line_h = size + 8
            height = line_h * len(chosen) + 2 * pad - 8
            if width > WIDTH - 20:
                continue
            x1 = rng.randint(10, WIDTH - width - 10)
            y1 = rng.randint(10, HEIGHT - height - 10)
            box = (x1, y1, x1 + width, y1 + height)
            if any(_overlap_share(box, s.box) > 0 or _overlap_share(s.box, box) > 0 for s in signs):
                continue
            lines = []
            for i, (word, lb) in enumerate(zip(chosen, line_boxes)):
                tx = x1 + pad - lb[0]
                ty = y1 + pad + i * line_h - lb[1]
                lines.append((word, (tx + lb[0], ty + lb[1], tx + lb[2], ty + lb[3])))
            signs.append(Sign(chosen, size, box, tuple(lines)))
            break
    return signs


def _place_shapes(rng: random.Random, n: int, keep_out: list[tuple[int, int, int, int]]) -> list[Shape]:
    shapes: list[Shape] = []
    attempts = 0
    while len(shapes) < n and attempts < 2000:
        attempts += 1
        size_name = rng.choice(list(SIZES))
        side = rng.randint(*SIZES[size_name])
        x1 = rng.randint(4, WIDTH - side - 4)
        y1 = rng.randint(4, HEIGHT - side - 4)
        box = (x1, y1, x1 + side, y1 + side)
        if any(_overlap_share(box, k) > 0 or _overlap_share(k, box) > 0 for k in keep_out):
            continue
        if any(_overlap_share(s.box, box) > MAX_OVERLAP or _overlap_share(box, s.box) > MAX_OVERLAP for s in shapes):
            continue
        # Overlap is allowed only between different colours, so every shape's outline stays visible.
        colour = rng.choice(list(COLOURS))
        if any(_overlap_share(s.box, box) > 0 and s.colour == colour for s in shapes):
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
    sentences = [f"A drawing on a {background} background with {described}."]
    for s in shapes:
        box = _unit_box(s.box)
        sentences.append(f"A {s.size} {s.colour} {s.shape} sits in the {region_of(box)} of the picture.")
    for sign in signs:
        sentences.append(f"A white sign with a dark border reads \"{' '.join(sign.words)}\".")
    return " ".join(sentences)


def _unit_box(box: tuple[int, int, int, int]) -> tuple[float, float, float, float]:
    return (round(box[0] / WIDTH, 4), round(box[1] / HEIGHT, 4), round(box[2] / WIDTH, 4), round(box[3] / HEIGHT, 4))


def render_scene(seed: int, index: int, font_path: Path, words: list[str]) -> tuple[Image.Image, dict]:
    """One scene and its manifest row. The same (seed, index) always gives the same pixels and truth."""
    rng = random.Random(f"{seed}:{index}")
    background = rng.choice(list(BACKGROUNDS))
    img = Image.new("RGB", (WIDTH, HEIGHT), BACKGROUNDS[background])
    draw = ImageDraw.Draw(img)
    signs = _place_signs(rng, words, font_path, rng.choice((0, 1, 1, 2)))
    shapes = _place_shapes(rng, rng.randint(2, 9), [s.box for s in signs])
    for sign in signs:
        draw.rectangle(sign.box, fill=(255, 255, 255), outline=(40, 40, 40), width=3)
        for text, (x1, y1, _x2, _y2) in sign.lines:
            font = ImageFont.truetype(str(font_path), sign.font_size)
            left, top = font.getbbox(text)[:2]
            draw.text((x1 - left, y1 - top), text, fill=(15, 15, 15), font=font)
    for s in shapes:
        fill = COLOURS[s.colour]
        if s.shape == "circle":
            draw.ellipse(s.box, fill=fill, outline=(0, 0, 0), width=2)
        elif s.shape == "square":
            draw.rectangle(s.box, fill=fill, outline=(0, 0, 0), width=2)
        else:
            draw.polygon(_polygon(s.shape, s.box), fill=fill, outline=(0, 0, 0), width=2)
    objects = [{"label": s.shape, "box": list(_unit_box(tight_box(s.shape, s.box))),
                "attributes": {"colour": s.colour, "shape": s.shape, "size": s.size}} for s in shapes]
    ocr = [{"text": text, "box": list(_unit_box(box))} for sign in signs for text, box in sign.lines]
    truth = {
        "seed": seed, "index": index, "background": background,
        "counts": dict(sorted(Counter(s.shape for s in shapes).items())),
        "colour_counts": dict(sorted(Counter(s.colour for s in shapes).items())),
        "signs": [{"words": list(sign.words), "box": list(_unit_box(sign.box))} for sign in signs],
        "words": [text for sign in signs for text, _ in sign.lines],
    }
    row = {"captions": [_caption(background, shapes, signs)], "objects": objects, "ocr": ocr, "truth": truth}
    return img, row


def scenes_key(n: int, seed: int) -> str:
    """What decides the scenes `make_scenes` renders: their count, their seed and the renderer's settings."""
    return stable_hash(n, seed, WIDTH, HEIGHT, SHAPES, COLOURS, SIZES, BACKGROUNDS, MAX_OVERLAP, scene_words())


def make_scenes(out_dir: Path, n: int, seed: int = 0, progress=None) -> Path:
    """Render n scenes into out_dir with manifest.jsonl; return the manifest path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    font_path = truetype_font()
    words = scene_words()
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
