"""Text-rich pages with exact truth: charts, tables, documents, maps and web pages rendered from data they
keep.

A renderer is a function `render(rng: random.Random) -> (PIL image, manifest row)` registered under a
kind in the entry-point group `benchsmith.renderers` (ours: `chart`, `table`, `document`, `map`, `web`);
another package adds a kind the same way. A renderer that needs a program may carry `missing() -> str | None`,
saying in one line how to install it: its kind then fails at once, and `mix` goes on without it. Its row
holds, in the format `benchsmith ingest` reads:
- `ocr`: every text as drawn, each line with its pixel box (`box_px`);
- `captions`: one sentence saying what the page is;
- `truth`: the structure it was drawn from (`kind`, then series and values, rows and cells, fields, or
  places, routes and regions), with `texts`: each OCR line's role (title, legend, column heading, ...),
  text and box.

`make_pages` writes the images and `manifest.jsonl`; one seed always gives the same pages.
"""

from __future__ import annotations

import json
import random
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from functools import lru_cache
from pathlib import Path
from typing import Callable

from PIL import Image, ImageFont

from benchsmith import plugins
from benchsmith.console import errors
from benchsmith.errors import BenchsmithError
from benchsmith.paths import DATA_DIR, truetype_font
from benchsmith.settings import parse_yaml

Renderer = Callable[[random.Random], tuple[Image.Image, dict]]
MIX = "mix"  # every installed renderer in turn


@lru_cache(maxsize=1)
def page_data() -> dict:
    """The themes, names and prices pages are drawn from (data/textrich.yaml)."""
    return parse_yaml((DATA_DIR / "textrich.yaml").read_text(encoding="utf-8"))


@lru_cache(maxsize=16)
def font(size: int) -> ImageFont.FreeTypeFont:
    """The TrueType font pages are written in, at `size`."""
    return ImageFont.truetype(str(truetype_font()), size)


def value_rows(rng: random.Random, theme: dict, names: list[str], series: list[str]) -> list[list[str]]:
    """A row for each name: the name, then a value for each series, every value of the theme's range at most
    once (no ties to compare)."""
    low, high = theme["values"]
    pool = rng.sample(range(low, high + 1), len(names) * len(series))
    return [[name, *(str(pool[i * len(series) + j]) for j in range(len(series)))] for i, name in enumerate(names)]


def px_box(bbox, height: int) -> list[float]:
    """A matplotlib display box (origin bottom left) as pixel xyxy from the top left."""
    return [round(float(v), 1) for v in (bbox.x0, height - bbox.y1, bbox.x1, height - bbox.y0)]


def row_of(caption: str, texts: list[dict], truth: dict) -> dict:
    """A manifest row from a page's caption, its drawn texts (each a dict with `role`, `text`, pixel
    `box_px` and what else places it: row, column, field) and its structure."""
    texts = [t | {"box_px": [round(v, 1) for v in t["box_px"]]} for t in texts]
    return {"captions": [caption], "ocr": [{"text": t["text"], "box_px": t["box_px"]} for t in texts],
            "truth": truth | {"texts": texts}}


def kinds() -> list[str]:
    """The installed renderers' kinds."""
    return plugins.names("renderers")


def renderer(kind: str) -> Renderer:
    return plugins.load("renderers", kind, where="--kind")


def missing(kind: str) -> str | None:
    """Why pages of `kind` cannot be drawn here (a program it needs is not installed), in one line: what its
    renderer's optional `missing()` says; None when they can."""
    check = getattr(renderer(kind), "missing", None)
    return check() if check else None


def _render_page(job: tuple[Path, str, int, int]) -> str:
    """Render page `index` of kind `name` into out_dir; its manifest line."""
    out_dir, name, seed, index = job
    image, row = renderer(name)(random.Random(f"{seed}:{name}:{index}"))
    path = f"{name}_{seed}_{index:05d}.png"
    image.save(out_dir / path, "PNG", compress_level=1)  # fast: the pages are re-encoded at ingest anyway
    return json.dumps({"path": path, "source": "benchsmith-textrich", "license": "CC0-1.0"} | row)


def make_pages(out_dir: Path, kind: str, n: int, seed: int = 0, progress=None, workers: int = 1) -> Path:
    """Render n pages of `kind` (or of every kind in turn: `mix`) into out_dir with manifest.jsonl, in
    `workers` processes; return the manifest path. Page i of a kind is the same whatever else is
    rendered beside it and however many processes render."""
    names = kinds() if kind == MIX else [kind]
    absent = {name: why for name in names if (why := missing(name))}  # an unknown kind fails before any work
    if kind != MIX and absent:
        raise BenchsmithError(absent[kind])
    for name, why in absent.items():
        errors.print(f"[yellow]warning:[/] mix goes on without {name} pages: {why}", highlight=False)
    names = [name for name in names if name not in absent]
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(out_dir, names[index % len(names)], seed, index) for index in range(n)]
    manifest = out_dir / "manifest.jsonl"
    with manifest.open("w", encoding="utf-8") as handle, ProcessPoolExecutor(workers) if workers > 1 else nullcontext() as pool:
        for line in (pool.map(_render_page, jobs, chunksize=4) if pool else map(_render_page, jobs)):
            handle.write(line + "\n")
            if progress:
                progress(1)
    return manifest
