"""Questions about web pages: each answer worked out again from the question's words and the page's manifest
(its lists and the boxes the browser measured), options from the page itself or from pages of the same
layout, and the path from `scenes make --kind web` through the installed command."""

from __future__ import annotations

import json
import re
from collections import Counter
from decimal import Decimal

import pytest

from benchsmith.dimensions import registry
from generators.textrich import GROUP_KINDS
from tests.generators.test_textrich import questions_of
from ingest.textrich import make_pages

DIMENSIONS = ("web_reading", "web_comparison", "web_layout")
ROLES = {"item of the top menu": "menu", "item of the side menu": "side_menu", "search result": "result",
         "product": "product"}


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> list[dict]:
    manifest = make_pages(tmp_path_factory.mktemp("web"), "web", 24, seed=2, workers=2)
    return [json.loads(line) for line in manifest.read_text().splitlines()]


@pytest.fixture(scope="module")
def asked(rows) -> list[tuple[dict, object]]:
    return questions_of(rows, DIMENSIONS)


def beside(truth: dict, role: str, name: str, place: str) -> str:
    """The text of `role` next to `name` on the page: the nearest one on that side whose middle lies within
    `name`'s extent across it."""
    boxes = {t["text"]: t["box_px"] for t in truth["texts"] if t["role"] == role}
    x1, y1, x2, y2 = boxes.pop(name)
    sides = {"to the right of": lambda b: (b[0] - x2, y1 <= (b[1] + b[3]) / 2 <= y2),
             "to the left of": lambda b: (x1 - b[2], y1 <= (b[1] + b[3]) / 2 <= y2),
             "below": lambda b: (b[1] - y2, x1 <= (b[0] + b[2]) / 2 <= x2 or x1 <= b[0] <= x2),
             "above": lambda b: (y1 - b[3], x1 <= (b[0] + b[2]) / 2 <= x2 or x1 <= b[0] <= x2)}
    near = [(gap, text) for text, box in boxes.items() for gap, lined_up in [sides[place](box)] if gap > 0 and lined_up]
    return min(near)[1]


def answer_from_truth(question: str, options: list[str], truth: dict) -> str:
    """The correct option, worked out from the question's words and the page's manifest."""
    products = {p["name"]: p for p in truth.get("products", ())}
    if question == "What is the name of the website at the top of the page?":
        return truth["title"]
    if question == "Which of these is written on a button on the page?":
        return next(o for o in options if o in truth["buttons"])
    if m := re.fullmatch(r"What does the profile show for (.+)\?", question):
        return truth["fields"][m[1]]
    if m := re.fullmatch(r"What is the price of (.+) on the page\?", question):
        return products[m[1]]["price"]
    if m := re.fullmatch(r"What rating does (.+) have on the page\?", question):
        return products[m[1]]["rating"]
    if m := re.fullmatch(r"Which website does the search result (.+) come from\?", question):
        return next(r["site"] for r in truth["results"] if r["title"] == m[1])
    if m := re.fullmatch(r"What does the table on the page show under (.+) for (.+)\?", question):
        return next(row for row in truth["rows"] if row[0] == m[2])[truth["columns"].index(m[1])]
    if m := re.fullmatch(r"Which of these (?:products is the|products has the|search results is ranked|counts is the"
                         r"|has the) (most expensive|cheapest|highest|lowest) ?(.*?) (?:in the table )?on the (?:page|profile)\?",
                         question):
        if "rating" in question:
            value = {n: Decimal(p["rating"]) for n, p in products.items()}
        elif "products" in question:
            value = {n: Decimal(p["price"].lstrip("$")) for n, p in products.items()}
        elif "search results" in question:
            value = {r["title"]: -rank for rank, r in enumerate(truth["results"])}
        elif "counts" in question:
            value = {k: int(v) for k, v in truth["fields"].items() if v.isdigit()}
        else:
            column = truth["columns"].index(m[2])
            value = {row[0]: int(row[column]) for row in truth["rows"]}
        return (max if m[1] in ("most expensive", "highest") else min)(options, key=value.__getitem__)
    if m := re.fullmatch(r"Which (.+) is directly (to the right of|to the left of|below|above) (.+) on the page\?", question):
        return beside(truth, ROLES[m[1]], m[3], m[2])
    raise AssertionError(f"no reading of {question!r}")


def test_every_answer_follows_from_the_question_and_the_page(asked):
    kinds = Counter()
    for row, q in asked:
        assert answer_from_truth(q.text, q.options, row["truth"]) == q.options[q.answer], (row["path"], q.text)
        assert len(set(q.options)) == 4
        kinds[(q.meta["template"], row["truth"]["layout"])] += 1
    for template in DIMENSIONS:  # every dimension asks about every layout
        assert {layout for t, layout in kinds if t == template} == {"shop", "results", "profile", "report"}, kinds


def test_options_come_from_the_page_or_from_pages_of_the_same_layout(asked, rows):
    sites = {layout: {r["truth"]["title"] for r in rows if r["truth"]["layout"] == layout} for layout in
             {r["truth"]["layout"] for r in rows}}
    for row, q in asked:
        truth = row["truth"]
        shown = {t["text"] for t in truth["texts"]} | {p[k] for p in truth.get("products", ()) for k in ("rating",)}
        if q.meta.get("pooled"):  # other pages' texts: only the key is on this page
            assert sum(o in shown for o in q.options) == 1, (q.text, q.options)
        else:
            assert set(q.options) <= shown, (q.text, q.options)
        if q.meta.get("pooled") == "title":
            assert set(q.options) <= sites[truth["layout"]]


def test_layout_is_asked_only_where_the_neighbour_is_clear(asked):
    directions = Counter(q.meta["direction"] for _row, q in asked if q.meta["template"] == "web_layout")
    assert set(directions) == {"right", "left", "below", "above"}
    for row, q in asked:
        if q.meta["template"] == "web_layout":
            name = re.search(r"directly (?:to the right of|to the left of|below|above) (.+) on the page\?$", q.text)[1]
            assert name not in q.options


def test_the_web_dimensions_are_24_to_26_in_the_web_group():
    assert [(d.id, d.key) for d in registry() if d.group == "web"] == [(24, "web_reading"), (25, "web_comparison"),
                                                                         (26, "web_layout")]


@pytest.mark.slow  # a browser and three commands: ~40 s on 2 busy cores
def test_web_pages_in_questions_out_through_the_installed_command(tmp_path):
    from tests.generators.test_cli import run

    made = run(tmp_path, "scenes", "make", "--kind", "web", "--n", "12", "--out", "pages")
    assert made.returncode == 0, made.stderr
    ingested = run(tmp_path, "ingest", "pages/manifest.jsonl")
    assert ingested.returncode == 0 and "12 added" in ingested.stdout, ingested.stdout + ingested.stderr
    generated = run(tmp_path, "generate", "-g", "textrich")
    assert generated.returncode == 0, generated.stderr
    textrich_dimensions = [d for d in registry() if d.group in GROUP_KINDS]
    assert re.search(rf"jobs\s+│\s+{12 * len(textrich_dimensions)} ", generated.stdout)  # one job a page and dimension
    from benchsmith.store import Store

    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        kept = Counter(q.dimension_id for q in store.get_questions() if q.status != "dropped")
    assert set(kept) == {24, 25, 26} and min(kept.values()) >= 12, kept
