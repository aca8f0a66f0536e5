"""Questions about text-rich pages: each answer recomputed from the question's words and the page's manifest
structure alone, options drawn from the page itself, and the whole path through the installed command."""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from benchsmith.dimensions import registry
from benchsmith.records import Image
from generators.textrich import Pools, TextRichSettings, generate
from ingest.textrich import make_pages

DIMENSIONS = ("chart_retrieval", "chart_comparison", "chart_arithmetic", "chart_reading", "chart_layout")


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> list[dict]:
    manifest = make_pages(tmp_path_factory.mktemp("pages"), "mix", 36, seed=1)
    return [json.loads(line) for line in manifest.read_text().splitlines()]


@pytest.fixture(scope="module")
def asked(rows) -> list[tuple[dict, object]]:
    """Every page's questions (correct option first), with the page's manifest row."""
    pools = Pools.of([row["truth"] for row in rows])
    out = []
    for i, row in enumerate(rows):
        item = Image(id=f"page{i}", path=row["path"], width=640, height=480, annotations={"truth": row["truth"]})
        for key in DIMENSIONS:
            out += [(row, q) for q in generate(item, registry().get(key), pools, TextRichSettings())]
    return out


def values_of(truth: dict, measure: str) -> dict[str, str]:
    """name -> value as written, for the column or series a question names ("value", "Market value", "Price")."""
    if truth["kind"] == "chart":
        series = (truth["series"][-1] if measure == "value" and truth["chart"] != "scatter"
                  else next(s for s in truth["series"] if f"{s['name']} value" == measure))
        suffix = "%" if truth["chart"] == "pie" else ""
        return {c: f"{v}{suffix}" for c, v in zip(truth["categories"], series["values"])}
    column = truth["columns"].index(measure)
    return {row[0]: row[column] for row in truth["rows"]}


def number(text: str) -> Decimal:
    return Decimal(text.rstrip("%"))


def answer_from_truth(question: str, options: list[str], truth: dict) -> str:
    """The correct option, worked out from the question's words and the page's structure."""
    if m := re.fullmatch(r"What value does the chart show for (.+?)(?: in the (.+) series)?\?", question):
        return values_of(truth, f"{m[2]} value" if m[2] else "value")[m[1]]
    if m := re.fullmatch(r"What does the \w+ show under (.+) for (.+)\?", question):
        return values_of(truth, m[1])[m[2]]
    if m := re.fullmatch(r"Which of these has the (highest|lowest) (.+) in the \w+\?", question):
        values = values_of(truth, m[2])
        return (max if m[1] == "highest" else min)(options, key=lambda o: number(values[o]))
    if m := re.fullmatch(r"What is the (sum of|difference between) the (.+) for (.+) and for (.+) in the \w+\?", question):
        values = values_of(truth, m[2])
        a, b = number(values[m[3]]), number(values[m[4]])
        result = a + b if m[1] == "sum of" else abs(a - b)
        return next(o for o in options if number(o) == result)
    if re.fullmatch(r"What is the title of the \w+\?", question):
        return truth["title"]
    if question == "Which of these is an entry in the legend of the chart?":
        return next(o for o in options if o in truth["legend"])
    if re.fullmatch(r"Which of these is a column heading in the \w+\?", question):
        return next(o for o in options if o in truth["columns"])
    if m := re.fullmatch(r"What is written for (.+) on the \w+\?", question):
        return truth["fields"][m[1]]
    if m := re.fullmatch(r"Which entry comes directly after (.+), going .+\?", question):
        names = truth["categories"] if truth["kind"] == "chart" else [row[0] for row in truth["rows"]]
        return names[names.index(m[1]) + 1]
    raise AssertionError(f"no reading of {question!r}")


def test_every_answer_follows_from_the_question_and_the_page_structure(asked):
    templates = Counter()
    for row, q in asked:
        assert answer_from_truth(q.text, q.options, row["truth"]) == q.options[q.answer], q.text
        templates[q.meta["template"]] += 1
    assert set(templates) == {"retrieval", "comparison", "arithmetic", "reading", "layout"}
    assert all(n >= 10 for n in templates.values()), templates


def test_only_one_option_is_right(asked):
    for row, q in asked:
        for i, option in enumerate(q.options):
            if i != q.answer:
                assert option != answer_from_truth(q.text, q.options, row["truth"])
        if q.meta["template"] == "comparison":  # no tie with the key among the options
            values = values_of(row["truth"], re.search(r"the (?:highest|lowest) (.+) in the \w+\?$", q.text)[1])
            key = q.options[q.answer]
            assert all(number(values[o]) != number(values[key]) for o in q.options if o != key)


def test_options_of_values_names_and_rows_come_from_the_same_page(asked):
    for row, q in asked:
        truth = row["truth"]
        shown = {t["text"] for t in truth["texts"]} | set(truth.get("categories", ()))
        if truth["kind"] == "chart":  # values an axis alone shows are still the chart's own
            shown |= {f"{v}{'%' if truth['chart'] == 'pie' else ''}" for s in truth["series"] for v in s["values"]}
        if q.meta["template"] in ("retrieval", "comparison", "layout"):
            assert set(q.options) <= shown, (q.text, q.options)
        if q.meta["template"] == "retrieval":  # a value is asked for only where the page writes it
            assert q.options[q.answer] in {t["text"] for t in truth["texts"]}, q.text
        if q.meta["template"] == "reading":  # the distractors are other pages' texts, never this page's
            assert sum(o in shown for o in q.options) == 1, (q.text, q.options)


def test_an_arithmetic_key_is_at_each_rank_among_its_options_as_often_as_chance():
    import random

    from scipy.stats import chisquare

    from generators.textrich import arithmetic

    ranks = Counter()
    for seed in range(300):
        rng = random.Random(seed)
        truth = {"kind": "table", "layout": "table", "columns": ["Item", "Count"],
                 "rows": [[f"item {i}", str(v)] for i, v in enumerate(rng.sample(range(1, 200), 5))]}
        for draft in arithmetic(truth, None, TextRichSettings(), rng):
            numbers = [Decimal(o) for o in draft.options]  # the key first
            ranks[sorted(numbers).index(numbers[0])] += 1
    assert chisquare([ranks[r] for r in range(4)]).pvalue > 0.01, ranks


def test_other_images_get_no_text_rich_questions(rows):
    pools = Pools.of([row["truth"] for row in rows])
    scene = Image(id="scene", path="s.png", width=640, height=480, annotations={"truth": {"counts": {"circle": 2}}})
    assert all(generate(scene, registry().get(key), pools, TextRichSettings()) == [] for key in DIMENSIONS)


def test_the_new_dimensions_are_appended_in_the_charts_group():
    dimensions = list(registry())
    assert [d.id for d in dimensions] == list(range(1, len(dimensions) + 1))
    assert [d.key for d in dimensions if d.group == "charts"] == list(DIMENSIONS)
    assert registry().get(9).key == "text_understanding" and registry().get(9).group == ""


@pytest.mark.slow  # the blind filter's solvers: ~3 minutes on 2 busy cores
def test_pages_in_questions_out_through_the_installed_command(tmp_path):
    from tests.generators.test_cli import run

    assert run(tmp_path, "scenes", "make", "--kind", "mix", "--n", "24", "--out", "pages").returncode == 0
    ingested = run(tmp_path, "ingest", "pages/manifest.jsonl")
    assert ingested.returncode == 0 and "24 added" in ingested.stdout, ingested.stdout + ingested.stderr
    made = run(tmp_path, "generate", "-g", "textrich")
    assert made.returncode == 0, made.stderr
    assert re.search(r"jobs\s+│\s+120 ", made.stdout)  # 24 pages x 5 dimensions
    kept = int(re.search(r"kept\s+│\s+(\d+) ", made.stdout)[1])
    assert kept >= 24 * 5
    filtered = run(tmp_path, "filter")
    assert filtered.returncode == 0, filtered.stderr
    assert "Chart Arithmetic" in filtered.stdout and "Chart Layout" in filtered.stdout
    from benchsmith.store import Store

    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        questions = [q for q in store.get_questions() if q.meta.get("generator") == "textrich"]
        blind = {v.subject_id for v in store.get_verdicts(stage="blind")}
    kept = [q for q in questions if q.status == "candidate"]
    assert kept and all(q.id in blind for q in kept), "every kept question was judged by the blind solvers"
    letters = Counter(q.answer for q in questions if q.status != "dropped")
    assert len(letters) == 4 and min(letters.values()) >= 0.15 * sum(letters.values())
    again = run(tmp_path, "generate", "-g", "textrich")
    assert re.search(r"jobs\s+│\s+0 ", again.stdout)
