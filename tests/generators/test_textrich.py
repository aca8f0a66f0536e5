"""Questions about text-rich pages: each answer recomputed from the question's words and the page's manifest
structure alone, options drawn from the page itself, and the whole path through the installed command."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from decimal import Decimal

import pytest

from benchsmith.dimensions import registry
from benchsmith.records import Fact, Image, Provenance, normalise_text
from generators.textrich import Pools, TextRichSettings, generate
from ingest.textrich import make_pages

DIMENSIONS = ("chart_retrieval", "chart_comparison", "chart_arithmetic", "chart_reading", "chart_layout")
MAP_DIMENSIONS = ("map_reading", "map_routes", "map_spatial")


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> list[dict]:
    manifest = make_pages(tmp_path_factory.mktemp("pages"), "mix", 36, seed=1)
    return [json.loads(line) for line in manifest.read_text().splitlines()]


def questions_of(rows: list[dict], keys) -> list[tuple[dict, object]]:
    """Every page's questions in the dimensions `keys` (correct option first), with the page's manifest row."""
    pools = Pools.of([row["truth"] for row in rows])
    out = []
    for i, row in enumerate(rows):
        item = Image(id=f"page{i}", path=row["path"], width=640, height=480, annotations={"truth": row["truth"]})
        for key in keys:
            out += [(row, q) for q in generate(item, registry().get(key), pools, TextRichSettings())]
    return out


@pytest.fixture(scope="module")
def asked(rows) -> list[tuple[dict, object]]:
    return questions_of(rows, DIMENSIONS)


def values_of(truth: dict, measure: str) -> dict[str, str]:
    """name -> value as written, for the column or series a question names ("value", "Market value", "Price")."""
    if truth["kind"] == "chart":
        series = (truth["series"][-1] if measure == "value" and truth["chart"] != "scatter"
                  else next(s for s in truth["series"] if f"{s['name']} value" == measure))
        suffix = "%" if truth["chart"] == "pie" else ""
        return {c: f"{v}{suffix}" for c, v in zip(truth["categories"], series["values"])}
    if measure == "amount listed":  # a page that draws no heading row, and one column of values
        assert not drawn_headings(truth) and len(truth["columns"]) == 2
        return {row[0]: row[1] for row in truth["rows"]}
    column = truth["columns"].index(measure)
    return {row[0]: row[column] for row in truth["rows"]}


def drawn_headings(truth: dict) -> set[str]:
    return {t["text"] for t in truth.get("texts", ()) if t["role"] == "column_heading"}


def number(text: str) -> Decimal:
    return Decimal(text.rstrip("%"))


def answer_from_truth(question: str, options: list[str], truth: dict) -> str:
    """The correct option, worked out from the question's words and the page's structure."""
    if m := re.fullmatch(r"What value does the chart show for (.+?)(?: in the (.+) series)?\?", question):
        return values_of(truth, f"{m[2]} value" if m[2] else "value")[m[1]]
    if m := re.fullmatch(r"What does the \w+ show under (.+) for (.+)\?", question):
        return values_of(truth, m[1])[m[2]]
    if m := re.fullmatch(r"What amount does the \w+ list beside (.+)\?", question):
        return values_of(truth, "amount listed")[m[1]]
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


def test_no_question_names_a_column_heading_the_page_does_not_draw(tmp_path):
    manifest = make_pages(tmp_path, "document", 40, seed=3)
    documents = [json.loads(line) for line in manifest.read_text().splitlines()]
    asked = questions_of(documents, ("chart_retrieval", "chart_comparison", "chart_arithmetic"))
    bare = [(row, q) for row, q in asked if row["truth"].get("layout") == "receipt" and not drawn_headings(row["truth"])]
    assert len(bare) >= 6, "receipts drawn without a heading row are asked about"
    for row, q in bare:
        assert not any(re.search(rf"\b{re.escape(h)}\b", q.text) for h in row["truth"]["columns"]), q.text
        assert answer_from_truth(q.text, q.options, row["truth"]) == q.options[q.answer], q.text


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
    assert all(generate(scene, registry().get(key), pools, TextRichSettings()) == []
               for key in DIMENSIONS + MAP_DIMENSIONS)


def test_charts_get_no_map_questions_and_maps_no_chart_questions(rows):
    pools = Pools.of([row["truth"] for row in rows])
    for i, row in enumerate(rows):
        item = Image(id=f"page{i}", path=row["path"], width=640, height=480, annotations={"truth": row["truth"]})
        other = DIMENSIONS if row["truth"]["kind"] == "map" else MAP_DIMENSIONS
        assert all(generate(item, registry().get(key), pools, TextRichSettings()) == [] for key in other)


def test_the_new_dimensions_are_appended_in_the_charts_group():
    dimensions = list(registry())
    assert [d.id for d in dimensions] == list(range(1, 30))  # 27-29: image sets
    assert [d.key for d in dimensions if d.group == "charts"] == list(DIMENSIONS)
    assert [(d.id, d.key) for d in dimensions if d.group == "maps"] == list(zip((21, 22, 23), MAP_DIMENSIONS))
    assert [d.id for d in dimensions if d.group == "web"] == [24, 25, 26]
    assert registry().get(9).key == "text_understanding" and registry().get(9).group == ""


@pytest.fixture(scope="module")
def map_asked(tmp_path_factory) -> list[tuple[dict, object]]:
    """Every map's questions (correct option first), with the map's truth."""
    manifest = make_pages(tmp_path_factory.mktemp("maps"), "map", 24, seed=2)
    truths = [json.loads(line)["truth"] for line in manifest.read_text().splitlines()]
    out = []
    for i, truth in enumerate(truths):
        item = Image(id=f"map{i}", path=f"map{i}.png", width=680, height=480, annotations={"truth": truth})
        for key in MAP_DIMENSIONS:
            out += [(truth, q) for q in generate(item, registry().get(key), Pools.of(truths), TextRichSettings())]
    return out


def right_options(question: str, options: list[str], truth: dict) -> set[str]:
    """The options that answer the question, worked out from its words and the map's places (positions),
    routes (stops in order), regions (polygons) and legend alone."""
    from tests.ingest.test_textrich import inside_polygon

    at = {p["name"]: (p["x"], p["y"]) for p in truth["places"]}
    width, height = truth["map_px"]
    if m := re.fullmatch(r"What does the (\w+) symbol stand for on the map\?", question):
        return {e["meaning"] for e in truth["legend"] if e["symbol"] == m[1]} & set(options)
    if m := re.fullmatch(r"Which route is drawn as the (\w+) line on the map\?", question):
        return {e["meaning"] for e in truth["legend"] if e.get("colour") == m[1]} & set(options)
    if m := re.fullmatch(r"What kind of place is (.+), going by its symbol on the map\?", question):
        symbol = next(p["symbol"] for p in truth["places"] if p["name"] == m[1])
        return {e["meaning"] for e in truth["legend"] if e["symbol"] == symbol} & set(options)
    if m := re.fullmatch(r"Which route runs directly between (.+) and (.+)\?", question):
        return {r["name"] for r in truth["routes"] if {m[1], m[2]} in map(set, zip(r["stops"], r["stops"][1:]))
                and r["name"] in options}
    if m := re.fullmatch(r"(Route \d+) starts at (.+)\. Which stop comes directly after (.+)\?", question):
        stops = next(r["stops"] for r in truth["routes"] if r["name"] == m[1])
        stops = stops if stops[0] == m[2] else stops[::-1]
        assert stops[0] == m[2]
        return {stops[stops.index(m[3]) + 1]} & set(options)
    if m := re.fullmatch(r"In which region of the map is (.+)\?", question):
        return {r["name"] for r in truth["regions"] if inside_polygon(at[m[1]], r["polygon"])} & set(options)
    if m := re.fullmatch(r"Which of these places lies in (.+)\?", question):
        polygon = next(r["polygon"] for r in truth["regions"] if r["name"] == m[1])
        return {o for o in options if inside_polygon(at[o], polygon)}
    if m := re.fullmatch(r"Which of these places lies farthest (north|south|east|west|up|down|right|left) on the map\?",
                         question):
        assert truth["compass"] == (m[1] in ("north", "south", "east", "west")), "compass points only with a north arrow"
        axis, sign = {"north": (1, -1), "south": (1, 1), "east": (0, 1), "west": (0, -1),
                      "up": (1, -1), "down": (1, 1), "right": (0, 1), "left": (0, -1)}[m[1]]
        far = sorted(options, key=lambda o: -sign * at[o][axis])
        seen = abs(at[far[0]][axis] - at[far[1]][axis]) >= 0.08 * (height if axis else width)  # visibly first
        return {far[0]} if seen else set(options)
    if m := re.fullmatch(r"Which of these places is nearest to (.+) in a straight line\?", question):
        near = sorted(options, key=lambda o: math.dist(at[o], at[m[1]]))
        seen = math.dist(at[near[1]], at[m[1]]) - math.dist(at[near[0]], at[m[1]]) >= 0.08 * width
        return {near[0]} if seen else set(options)
    raise AssertionError(f"no reading of {question!r}")


def test_every_map_question_has_one_right_option_the_key(map_asked):
    asks = Counter()
    for truth, q in map_asked:
        assert right_options(q.text, q.options, truth) == {q.options[q.answer]}, (q.text, q.options)
        asks[q.meta["ask"]] += 1
    assert set(asks) == {"symbol", "line", "kind", "connects", "next stop", "region", "in region", "farthest",
                         "nearest"}
    assert all(n >= 3 for n in asks.values()), asks


def test_map_options_are_this_maps_own_and_name_no_place_of_the_question_but_the_key(map_asked):
    for truth, q in map_asked:
        own = ({p["name"] for p in truth["places"]} | {r["name"] for r in truth["routes"]}
               | {r["name"] for r in truth["regions"]} | {e["meaning"] for e in truth["legend"]})
        assert set(q.options) <= own and len(set(q.options)) == 4, (q.text, q.options)
        key = q.options[q.answer]
        assert not any(re.search(rf"\b{re.escape(o)}\b", q.text) for o in q.options if o != key), q.text


def test_maps_in_questions_out_through_the_installed_command(tmp_path):
    from tests.generators.test_cli import run

    assert run(tmp_path, "scenes", "make", "--kind", "map", "--n", "6", "--out", "maps").returncode == 0
    ingested = run(tmp_path, "ingest", "maps/manifest.jsonl")
    assert ingested.returncode == 0 and "6 added" in ingested.stdout, ingested.stdout + ingested.stderr
    made = run(tmp_path, "generate", "-g", "textrich", *(arg for key in MAP_DIMENSIONS for arg in ("-d", key)))
    assert made.returncode == 0, made.stderr
    assert re.search(r"jobs\s+│\s+18 ", made.stdout), made.stdout  # 6 maps x 3 map dimensions
    from benchsmith.store import Store

    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        asked = Counter(q.dimension_id for q in store.get_questions() if q.meta.get("generator") == "textrich")
        kept = Counter(q.meta.get("ask") for q in store.get_questions(status="candidate"))
    assert set(asked) == {21, 22, 23} and min(asked.values()) >= 6, asked
    # route names that differ in their number are honest options: the gate keeps both route templates
    assert kept["connects"] >= 3 and kept["line"] >= 1, kept


@pytest.mark.slow  # the blind filter's solvers: ~3 minutes on 2 busy cores
def test_pages_in_questions_out_through_the_installed_command(tmp_path):
    from tests.generators.test_cli import run

    assert run(tmp_path, "scenes", "make", "--kind", "mix", "--n", "24", "--out", "pages").returncode == 0
    ingested = run(tmp_path, "ingest", "pages/manifest.jsonl")
    assert ingested.returncode == 0 and "24 added" in ingested.stdout, ingested.stdout + ingested.stderr
    made = run(tmp_path, "generate", "-g", "textrich")
    assert made.returncode == 0, made.stderr
    assert re.search(r"jobs\s+│\s+264 ", made.stdout)  # 24 pages x 11 dimensions (5 charts, 3 maps, 3 web)
    kept = int(re.search(r"kept\s+│\s+(\d+) ", made.stdout)[1])
    assert kept >= 15 * 5 + 5 * 3 + 4 * 2  # 15 charts, tables and documents; 5 maps; 4 web pages
    filtered = run(tmp_path, "filter")
    assert filtered.returncode == 0, filtered.stderr
    assert all(name in filtered.stdout for name in ("Chart Arithmetic", "Chart Layout", "Map Routes"))
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


# -- only text OCR read (the local profile) --------------------------------------------------------

def ocr_lines(truth: dict, texts: list[tuple[str, list[float]]]) -> list[Fact]:
    """OCR facts as an extractor gives them: `texts`' pixel boxes (640x480) as unit quads."""
    out = []
    for text, (x1, y1, x2, y2) in texts:
        x1, x2, y1, y2 = x1 / 640, x2 / 640, y1 / 480, y2 / 480
        out.append(Fact(item_id="page", kind="ocr", text=text, quad=((x1, y1), (x2, y1), (x2, y2), (x1, y2)),
                        provenance=Provenance(backend="rapidocr")))
    return out


def test_with_only_ocr_text_questions_showing_a_text_ocr_missed_are_dropped_with_that_text(rows):
    pools = Pools.of([row["truth"] for row in rows])
    truth = next(row["truth"] for row in rows if row["truth"]["kind"] == "table")
    item = Image(id="page", path="page.png", width=640, height=480, annotations={"truth": truth})
    missed = truth["rows"][1][0]  # a row's name; OCR read every other text
    first_row = [t for t in truth["texts"] if t.get("row") == 0]
    merged = (" ".join(t["text"] for t in first_row),  # one OCR line over the whole first row
              [min(t["box_px"][0] for t in first_row), min(t["box_px"][1] for t in first_row),
               max(t["box_px"][2] for t in first_row), max(t["box_px"][3] for t in first_row)])
    read = ocr_lines(truth, [merged] + [(t["text"], t["box_px"]) for t in truth["texts"]
                                        if t["text"] != missed and t.get("row") != 0])
    limited, plain = TextRichSettings(only_ocr_text=True), TextRichSettings()
    for key in DIMENSIONS:
        dimension = registry().get(key)
        asked = generate(item, dimension, pools, limited, ocr=read)
        kept = [q for q in asked if not q.meta.get("dropped")]
        assert all(missed not in q.text and missed not in q.options for q in kept)
        if key == "chart_retrieval":  # drafts enough about other rows: as many asked as without the limit
            assert len(kept) == len(generate(item, dimension, pools, plain, ocr=read)) == 3
        for q in asked:
            if q.meta.get("drop_rule") == "text_not_read":
                assert q.meta["dropped"].endswith(f"{missed!r} was not read by OCR")
        # without OCR facts (no OCR extractor ran) nothing is limited
        assert ([(q.text, q.options, q.meta) for q in generate(item, dimension, pools, limited)]
                == [(q.text, q.options, q.meta) for q in generate(item, dimension, pools, plain)])
    dropped = [q for key in DIMENSIONS for q in generate(item, registry().get(key), pools, limited, ocr=read)
               if q.meta.get("drop_rule") == "text_not_read"]
    assert {q.meta["dropped"].split(" ", 2)[1] for q in dropped} >= {"key", "question's"}


def test_with_only_ocr_text_a_comparison_is_not_asked_over_a_value_ocr_misread(rows):
    pools = Pools.of([row["truth"] for row in rows])
    truth = next(row["truth"] for row in rows if row["truth"]["kind"] == "table")
    item = Image(id="page", path="page.png", width=640, height=480, annotations={"truth": truth})
    cell = next(t for t in truth["texts"] if t.get("row") == 1 and t.get("column") == 1)
    misread = ocr_lines(truth, [(cell["text"][::-1] + "9", cell["box_px"])]
                        + [(t["text"], t["box_px"]) for t in truth["texts"] if t is not cell])
    compared = [q for q in generate(item, registry().get("chart_comparison"), pools,
                                    TextRichSettings(only_ocr_text=True, per_dimension=40), ocr=misread)
                if q.meta.get("template") == "comparison"]
    name, column = truth["rows"][1][0], truth["columns"][1]
    over_the_cell = [q for q in compared if name in q.options and f" {column} " in q.text]
    assert over_the_cell and all(q.meta.get("drop_rule") == "text_not_read" for q in over_the_cell)
    assert all(q.meta["dropped"] == f"the operand {cell['text']!r} was not read by OCR" for q in over_the_cell)


@pytest.mark.slow  # RapidOCR on a busy 2-core box: ~10 s a page
def test_local_profile_asks_only_about_text_rapidocr_read_and_reports_what_it_dropped(tmp_path):
    from PIL import Image as Picture, ImageDraw

    from benchsmith.store import Store
    from tests.generators.test_cli import run

    assert run(tmp_path, "scenes", "make", "--kind", "table", "--n", "3", "--out", "pages").returncode == 0
    rows = [json.loads(line) for line in (tmp_path / "pages" / "manifest.jsonl").read_text().splitlines()]
    table = next(row for row in rows if row["truth"]["kind"] == "table")
    hidden = next(t for t in table["truth"]["texts"] if t.get("row") == 1 and t["column"] == 0)
    with Picture.open(tmp_path / "pages" / table["path"]) as picture:  # paint over one row's name
        page = picture.convert("RGB")
    ImageDraw.Draw(page).rectangle(hidden["box_px"], fill=page.getpixel((2, 2)))
    page.save(tmp_path / "pages" / table["path"])
    assert run(tmp_path, "ingest", "pages/manifest.jsonl").returncode == 0
    extracted = run(tmp_path, "extract")  # the local profile: supplied facts, then RapidOCR
    assert extracted.returncode == 0 and "rapidocr" in extracted.stdout, extracted.stderr
    made = run(tmp_path, "generate", "-g", "textrich")
    assert made.returncode == 0, made.stderr
    dropped = int(re.search(r"dropped: text_not_read\s+│\s+(\d+) ", made.stdout)[1])
    assert dropped >= 1

    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        items = {i.id: i for i in store.get_items(kind="image")}
        facts = store.get_facts(list(items))
        questions = [q for q in store.get_questions() if q.meta.get("generator") == "textrich"]
        reasons = {v.subject_id: v.reason for v in store.get_verdicts(stage="quality") if v.rule == "text_not_read"}
    assert 0 < len(reasons) <= dropped  # the counter counts a question drafted twice (one id) twice
    assert any(repr(hidden["text"]) in reason for reason in reasons.values())
    kept = [q for q in questions if q.status == "candidate"]
    assert kept
    for q in kept:  # each text of its page a kept question shows was read, somewhere on the page, by RapidOCR
        read = " | ".join(normalise_text(f.text) for f in facts[q.item_id] if f.provenance.backend == "rapidocr")
        drawn = {t["text"] for t in items[q.item_id].annotations["truth"]["texts"]}
        shown = [o for o in q.options if o in drawn] + [t for t in drawn if re.search(rf"(?<!\w){re.escape(t)}(?!\w)", q.text)]
        assert all(normalise_text(t) in read for t in shown), (q.text, q.options)
        assert hidden["text"] not in q.options and not re.search(rf"\b{re.escape(hidden['text'])}\b", q.text)
