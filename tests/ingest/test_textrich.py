"""Text-rich pages: every renderer's truth checked against its own image (real RapidOCR reads the words,
each box lies on what it names), rendering is fixed by the seed, and a plugin adds a kind of page."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from benchsmith.images import open_rgb
from ingest.textrich import make_pages

KINDS = ("chart", "table", "document", "map")


def pages(folder: Path) -> list[tuple[np.ndarray, dict]]:
    rows = [json.loads(line) for line in (folder / "manifest.jsonl").read_text().splitlines()]
    return [(np.asarray(open_rgb(folder / row["path"])).astype(int), row) for row in rows]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, list[tuple[np.ndarray, dict]]]:
    out = {}
    for kind in KINDS:
        folder = tmp_path_factory.mktemp(kind)
        make_pages(folder, kind, 24 if kind == "chart" else 12, seed=3)
        out[kind] = pages(folder)
    return out


def crop(pixels: np.ndarray, box) -> np.ndarray:
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    return pixels[y1:y2, x1:x2].reshape(-1, 3)


@pytest.mark.parametrize("kind", KINDS)
def test_every_text_box_holds_ink_darker_than_what_surrounds_it(rendered, kind):
    for pixels, row in rendered[kind]:
        height, width = pixels.shape[:2]
        assert row["ocr"] and len(row["ocr"]) == len(row["truth"]["texts"])
        for line in row["ocr"]:
            x1, y1, x2, y2 = line["box_px"]
            assert 0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height
            light = crop(pixels, line["box_px"]).sum(axis=1) / 3
            assert light.min() < np.median(light) - 60, f"no ink under {line['text']!r} in {row['path']}"


def test_every_chart_mark_lies_on_its_own_colour(rendered):
    roles = Counter()
    for pixels, row in rendered["chart"]:
        for mark in row["truth"]["marks"]:
            colour = np.array([int(mark["colour"][i:i + 2], 16) for i in (1, 3, 5)])
            inside = crop(pixels, mark["box_px"])
            share = (np.abs(inside - colour).max(axis=1) <= 12).mean()
            # a wedge fills a part of its box; a bar and a point's centre all of it
            assert share >= (0.2 if mark["role"] == "wedge" else 0.8), (row["path"], mark)
            roles[mark["role"]] += 1
    assert set(roles) == {"bar", "segment", "wedge", "point"}


def test_a_chart_says_its_values_are_written_only_when_each_one_is(rendered):
    for _pixels, row in rendered["chart"]:
        truth = row["truth"]
        written = Counter(t["text"] for t in truth["texts"] if t["role"] == "value_label")
        suffix = "%" if truth["chart"] == "pie" else ""
        values = Counter(f"{m['value']}{suffix}" for m in truth["marks"])
        assert truth["value_labels"] == (written == values), row["path"]
        assert not written or written == values


def test_table_and_document_cells_are_the_rows_of_their_truth(rendered):
    for kind in ("table", "document"):
        for _pixels, row in rendered[kind]:
            truth = row["truth"]
            for text in truth["texts"]:
                if text["role"] == "cell":
                    assert truth["rows"][text["row"]][text["column"]] == text["text"]
                elif text["role"] == "column_heading":
                    assert truth["columns"][text["column"]] == text["text"]
                elif text["role"] == "field_value":
                    assert truth["fields"][text["field"]] == text["text"]


def test_invoice_amounts_add_up(rendered):
    from decimal import Decimal

    invoices = [row["truth"] for _p, row in rendered["document"] if row["truth"]["layout"] == "invoice"]
    assert invoices
    for truth in invoices:
        assert all(Decimal(qty) * Decimal(price) == Decimal(amount) for _i, qty, price, amount in truth["rows"])
        fields = {k: Decimal(v) for k, v in truth["fields"].items() if k in ("Subtotal", "Tax", "Total")}
        assert sum(Decimal(r[3]) for r in truth["rows"]) == fields["Subtotal"]
        assert fields["Subtotal"] + fields["Tax"] == fields["Total"]


def test_a_product_is_priced_afresh_on_each_page_so_no_price_list_can_be_learnt(tmp_path):
    make_pages(tmp_path, "document", 40, seed=11)
    prices: dict[str, set[str]] = {}
    for _pixels, row in pages(tmp_path):
        truth = row["truth"]
        for cells in truth.get("rows", ()) if truth["layout"] in ("invoice", "receipt") else ():
            prices.setdefault(cells[0], set()).add(cells[truth["columns"].index("Price")])
    seen_twice = {name: found for name, found in prices.items() if len(found) > 1}
    assert len(seen_twice) >= 10, prices  # one price per product on every page was a list a text-only model learns


def test_a_line_chart_over_years_names_enough_things_to_pass_the_richness_filter():
    import random

    from benchsmith.settings import Richness
    from ingest.richness import count_nouns
    from ingest.textrich.charts import draw_spec, render

    seeds = [s for s in range(300) if all(c.isdigit() for c in draw_spec(random.Random(s)).categories)][:4]
    assert len(seeds) == 4
    for seed in seeds:
        _image, row = render(random.Random(seed))
        assert count_nouns(row["captions"], Richness().spacy_model) >= Richness().min_nouns, row["captions"]


def share_of(pixels: np.ndarray, box, rgb) -> float:
    """The share of the box's pixels drawn in colour rgb."""
    return float((np.abs(crop(pixels, box) - np.array(rgb)).max(axis=1) <= 12).mean())


def inside_polygon(point, polygon) -> bool:
    """Whether point lies inside polygon: a ray from it to the right crosses the border an odd number of times."""
    x, y = point
    crossed = [(y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1)
               for (x1, y1), (x2, y2) in zip(polygon, polygon[1:] + polygon[:1])]
    return sum(crossed) % 2 == 1


def test_each_map_marker_lies_on_its_colour_in_the_one_region_that_lists_its_place(rendered):
    for pixels, row in rendered["map"]:
        truth = row["truth"]
        for place in truth["places"]:
            x, y = place["x"], place["y"]
            ink = [int(place["colour"][i:i + 2], 16) for i in (1, 3, 5)]
            assert share_of(pixels, (x - 2, y - 2, x + 3, y + 3), ink) == 1, (row["path"], place)
            assert [r["name"] for r in truth["regions"] if inside_polygon((x, y), r["polygon"])] == [place["region"]]
            assert [r["name"] for r in truth["regions"] if place["name"] in r["places"]] == [place["region"]]


def test_each_route_line_runs_straight_from_stop_to_stop_in_its_colour(rendered):
    legs = 0
    for pixels, row in rendered["map"]:
        truth = row["truth"]
        at = {p["name"]: (p["x"], p["y"]) for p in truth["places"]}
        assert {e["meaning"]: e["colour"] for e in truth["legend"] if e["symbol"] == "line"} == {
            r["name"]: r["colour"] for r in truth["routes"]}
        for route in truth["routes"]:
            assert len(route["stops"]) >= 3
            for a, b in zip(route["stops"], route["stops"][1:]):
                (x1, y1), (x2, y2) = at[a], at[b]
                along = [(x1 + t * (x2 - x1), y1 + t * (y2 - y1)) for t in np.linspace(0.15, 0.85, 15)]
                drawn = sum(share_of(pixels, (x - 1, y - 1, x + 2, y + 2), route["rgb"]) > 0 for x, y in along)
                assert drawn >= 12, (row["path"], route["name"], a, b)  # another route may cross it
                legs += 1
    assert legs >= 12 * 4 * 2


def test_map_names_cover_no_other_name_marker_or_route_line(rendered):
    for pixels, row in rendered["map"]:
        truth = row["truth"]
        boxes = [t["box_px"] for t in truth["texts"]]
        markers = [p["box_px"] for p in truth["places"]]
        for i, box in enumerate(boxes):
            assert not any(overlap(box, other) for other in boxes[i + 1:] + markers), (row["path"], truth["texts"][i])
            assert all(share_of(pixels, box, route["rgb"]) == 0 for route in truth["routes"]), row["path"]


def overlap(a, b) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def test_rapidocr_reads_at_least_95_percent_of_the_drawn_words_of_each_kind(rendered, settings):
    from benchsmith.records import Image
    from extractors.base import Loaded, build_extractors
    from PIL import Image as PILImage

    extractor, = build_extractors(settings, only=["rapidocr"])
    extractor.load()
    for kind, drawn in rendered.items():
        found = total = 0
        for pixels, row in drawn[:6]:
            image = PILImage.fromarray(pixels.astype("uint8"))
            facts, = extractor.extract([Loaded(Image(id=row["path"], path=row["path"], width=image.width,
                                                     height=image.height), image)])
            read = Counter(w.casefold() for f in facts for w in f.text.split())
            true = Counter(w.casefold() for line in row["ocr"] for w in line["text"].split())
            found, total = found + sum((true & read).values()), total + sum(true.values())
        assert found / total >= 0.95, f"{kind}: {found}/{total} words read"


def test_a_seed_renders_the_same_pages_and_mix_takes_every_kind_in_turn(tmp_path):
    first, again = make_pages(tmp_path / "a", "mix", 8, seed=5), make_pages(tmp_path / "b", "mix", 8, seed=5, workers=2)
    assert first.read_text() == again.read_text()
    rows = [json.loads(line) for line in first.read_text().splitlines()]
    assert [row["truth"]["kind"] for row in rows] == ["chart", "document", "map", "table", "web", "chart", "document",
                                                     "map"]
    assert all((tmp_path / "a" / row["path"]).read_bytes() == (tmp_path / "b" / row["path"]).read_bytes()
               for row in rows)
    other = make_pages(tmp_path / "c", "mix", 6, seed=6)
    assert other.read_text() != first.read_text()


def test_a_plugin_renderer_is_a_kind_of_page_and_joins_the_mix(tmp_path):
    from tests.benchsmith.test_plugins import install_beside

    env = install_beside(tmp_path, "poster-pages", {"poster_pages": """
        from PIL import Image, ImageDraw
        from benchsmith.paths import truetype_font
        from PIL import ImageFont

        def render(rng):
            image = Image.new("RGB", (320, 120), "white")
            word = rng.choice(["SALE", "OPEN", "FRESH"])
            draw = ImageDraw.Draw(image)
            font = ImageFont.truetype(str(truetype_font()), 40)
            draw.text((20, 30), word, fill="black", font=font)
            box = list(draw.textbbox((20, 30), word, font=font))
            return image, {"ocr": [{"text": word, "box_px": box}], "truth": {"kind": "poster", "word": word}}
        """}, "[benchsmith.renderers]\nposter = poster_pages:render\n")
    benchsmith = str(Path(sys.executable).with_name("benchsmith"))
    made = subprocess.run([benchsmith, "scenes", "make", "--kind", "mix", "--n", "5", "--out", "pages"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    kinds = [json.loads(line)["truth"]["kind"] for line in (tmp_path / "pages" / "manifest.jsonl").read_text().splitlines()]
    assert kinds == ["chart", "document", "map", "poster", "table"]
    unknown = subprocess.run([benchsmith, "scenes", "make", "--kind", "globe", "--out", "globes"], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert unknown.returncode != 0 and "poster" in unknown.stderr + unknown.stdout
