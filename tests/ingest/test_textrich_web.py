"""Web pages drawn by headless Chromium: each text's measured box lies on its ink, real RapidOCR reads the
words, the truth is what the page shows in the order it shows it, a seed gives the same pages in any
number of processes, each process's browser goes away with it, and without Chromium `--kind web` says how
to install it while `mix` goes on without it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ingest.textrich import make_pages
from tests.ingest.test_textrich import crop, pages

BENCHSMITH = str(Path(sys.executable).with_name("benchsmith"))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> list[tuple[np.ndarray, dict]]:
    folder = tmp_path_factory.mktemp("web")
    make_pages(folder, "web", 16, seed=3, workers=2)
    return pages(folder)


def overlap(a, b) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def test_every_text_box_lies_on_ink_inside_the_page_apart_from_the_others(rendered):
    layouts = Counter()
    for pixels, row in rendered:
        height, width = pixels.shape[:2]
        boxes = [line["box_px"] for line in row["ocr"]]
        assert len(boxes) == len(row["truth"]["texts"]) >= 12
        for line in row["ocr"]:
            x1, y1, x2, y2 = line["box_px"]
            assert 0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height, (row["path"], line)
            inside = crop(pixels, line["box_px"])
            # letters differ from the ground they are drawn on: dark on light, or white on the accent colour
            assert np.abs(inside - np.median(inside, axis=0)).max() > 100, f"no ink under {line['text']!r} in {row['path']}"
        assert not any(overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]), row["path"]
        layouts[row["truth"]["layout"]] += 1
    assert set(layouts) == {"shop", "results", "profile", "report"}


def test_the_truth_is_what_the_page_shows_in_the_order_it_shows_it(rendered):
    for _pixels, row in rendered:
        truth = row["truth"]
        by_role = {role: [t for t in truth["texts"] if t["role"] == role] for role in {t["role"] for t in truth["texts"]}}
        assert [t["text"] for t in by_role["title"]] == [truth["title"]]
        assert [t["text"] for t in by_role["menu"]] == truth["menu"]
        assert [t["box_px"][0] for t in by_role["menu"]] == sorted(t["box_px"][0] for t in by_role["menu"])
        side = by_role.get("side_menu", [])
        assert [t["text"] for t in side] == truth["side_menu"]
        assert [t["box_px"][1] for t in side] == sorted(t["box_px"][1] for t in side)
        assert set(truth["buttons"]) == {t["text"] for t in by_role["button"]}
        for t in truth["texts"]:
            if t["role"] in ("product", "price"):
                assert truth["products"][t["item"]][{"product": "name"}.get(t["role"], t["role"])] == t["text"]
            elif t["role"] == "rating":
                assert t["text"] == f"Rating {truth['products'][t['item']]['rating']}"
            elif t["role"] in ("result", "site"):
                assert truth["results"][t["rank"]][{"result": "title"}.get(t["role"], t["role"])] == t["text"]
            elif t["role"] == "cell":
                assert truth["rows"][t["row"]][t["column"]] == t["text"]
            elif t["role"] == "field_value":
                assert truth["fields"][t["field"]] == t["text"]
        results = by_role.get("result", [])  # ranked from the top down
        assert [t["rank"] for t in sorted(results, key=lambda t: t["box_px"][1])] == list(range(len(results)))


def test_rapidocr_reads_at_least_95_percent_of_the_drawn_words(rendered, settings):
    from PIL import Image as PILImage

    from benchsmith.records import Image
    from extractors.base import Loaded, build_extractors

    extractor, = build_extractors(settings, only=["rapidocr"])
    extractor.load()
    found = total = 0
    first_of_each_layout = {row["truth"]["layout"]: (pixels, row) for pixels, row in reversed(rendered)}
    for pixels, row in first_of_each_layout.values():
        image = PILImage.fromarray(pixels.astype("uint8"))
        facts, = extractor.extract([Loaded(Image(id=row["path"], path=row["path"], width=image.width,
                                                 height=image.height), image)])
        read = Counter(w.casefold() for f in facts for w in f.text.split())
        true = Counter(w.casefold() for line in row["ocr"] for w in line["text"].split())
        found, total = found + sum((true & read).values()), total + sum(true.values())
    assert found / total >= 0.95, f"{found}/{total} words read"


def test_a_seed_draws_the_same_pages_in_one_process_or_two(rendered, tmp_path):
    again = make_pages(tmp_path, "web", 4, seed=3)
    rows = [json.loads(line) for line in again.read_text().splitlines()]
    assert [row for _p, row in rendered[:4]] == rows
    assert all(np.array_equal(pixels, drawn) for (pixels, _r), (drawn, _row) in zip(rendered, pages(tmp_path)))


@pytest.mark.timeout(180)  # two processes reading one browser's replies wait for each other for ever
def test_a_process_that_has_a_browser_can_fork_workers_and_draw_on(tmp_path):
    first = make_pages(tmp_path / "here", "web", 1, seed=4)  # this process starts its browser
    forked = make_pages(tmp_path / "forked", "web", 12, seed=4, workers=2)  # both workers draw at once
    again = make_pages(tmp_path / "again", "web", 1, seed=4)
    assert first.read_text() == again.read_text() == forked.read_text().splitlines(keepends=True)[0]


def cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([BENCHSMITH, "scenes", "make", *args], cwd=tmp_path, env=os.environ | env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_each_process_closes_its_browser_when_it_ends(tmp_path, workers):
    scratch = Path(tempfile.mkdtemp(dir="/tmp"))  # short: Chromium's socket path under it must fit 107 bytes
    try:
        made = cli(tmp_path, "--kind", "web", "--n", "4", "--workers", workers, "--out", "pages", TMPDIR=str(scratch))
        assert made.returncode == 0, made.stderr
        assert len((tmp_path / "pages" / "manifest.jsonl").read_text().splitlines()) == 4
        assert list(scratch.iterdir()) == []  # every browser quit and its profile was removed
    finally:
        shutil.rmtree(scratch)


def test_without_chromium_web_says_how_to_install_it_and_mix_goes_on_without_it(tmp_path):
    web = cli(tmp_path, "--kind", "web", "--n", "2", "--out", "web", CHROMIUM="/nonexistent/chromium")
    assert web.returncode != 0 and not (tmp_path / "web" / "manifest.jsonl").exists()
    message = web.stderr.strip()
    assert "\n" not in message and "apt-get install -y chromium" in message and "Traceback" not in message
    mix = cli(tmp_path, "--kind", "mix", "--n", "4", "--out", "mix", CHROMIUM="/nonexistent/chromium")
    assert mix.returncode == 0, mix.stderr
    assert "without web pages" in mix.stderr
    kinds = [json.loads(line)["truth"]["kind"] for line in (tmp_path / "mix" / "manifest.jsonl").read_text().splitlines()]
    assert kinds == ["chart", "document", "map", "table"]
