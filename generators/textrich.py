"""Exact questions about text-rich pages (charts, tables, documents; maps in `textrich_maps`, web pages in
`textrich_web`; real scanned receipts, with templates of their own, in `textrich_receipts`) from the
structure they were drawn from.

A page rendered by `ingest.textrich` carries its truth in its annotations (`truth`: series and values,
columns and rows, fields, and every drawn text with its role). One template per dimension of the
`charts` group turns that structure into questions, the correct option first, in the programmatic
generator's drafts; the quality gate, the letter balance and the blind filter then treat them like any
other question. The options alone say nothing:
- values, names and rows are drawn from the same page: a bar's value among other values of its series,
  a highest entry among other entries, the next bar among other bars, so each is the key as often as it is
  shown and its rank among the four is uniform;
- sums and differences have for distractors the same operation over other pairs of the same page;
- titles, legend entries, column headings and field values have for distractors the same kind of text
  from other pages of the collection (`Pools`), never from this page.
A comparison read off an axis (no value written on the chart) is asked only when the key leads the next
option by `min_gap` of the largest value, so it can be seen.

With `only_ocr_text` (the `local` profile) and lines an OCR extractor read on the page, a question is asked
only when OCR read every text of the page it shows: the texts its words name, its options drawn on the
page (the key and, since a reader must find each option to rule it out, the distractors) and the values
its answer is worked out from (`meta["reads"]`: the operands of a sum or difference, the written values
a comparison ranks). A text counts as read when an OCR line over a place it is drawn holds its words. The others are kept as dropped (`text_not_read`) with the text OCR missed.
"""

from __future__ import annotations

import itertools
import random
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation

from pydantic import Field

from benchsmith import runner
from benchsmith.dimensions import Dimension
from benchsmith.records import Fact, Image, Question, normalise_text, stable_hash
from benchsmith.geometry import unit_box
from benchsmith.settings import Strict
from generators import textrich_maps, textrich_receipts, textrich_web
from generators.programmatic import Draft, drafts_of, four_options, questions_from
from generators.base import WAITING_FOR_FACTS
from generators.stage import Job, Outcome, QuestionStage
from generators.textrich_pools import PAGE_KINDS, Pools, headings, noun

BACKEND = "textrich"
VERSION = "textrich-v1"
# the pages each group of dimensions asks about
GROUP_KINDS = {"charts": (*PAGE_KINDS, textrich_receipts.KIND), "maps": ("map",), "web": ("web",)}


class TextRichSettings(Strict):
    per_dimension: int = Field(3, ge=1)        # at most this many questions per page and dimension
    # a comparison read off an axis or a map: the key's lead over the next, of the largest value or the map's size
    min_gap: float = Field(0.08, ge=0, le=1)
    only_ocr_text: bool = False                # where OCR ran on a page: ask only about text it read


@dataclass(frozen=True)
class Column:
    """Named entries a page shows one value for each: a chart series over its categories, a table column
    over its rows. `retrieve` asks for one entry's value (`{name}`); `measure` names what is compared and
    added ("value", "Market value", "Price"); `scope` ends each question ("in the chart")."""

    names: tuple[str, ...]
    cells: tuple[str, ...]
    retrieve: str
    measure: str
    scope: str
    readable: bool  # every value is written on the page, not only read off an axis
    log_scale: bool = False  # read off a log axis: no comparison by eye

    def numbers(self) -> tuple[Decimal, ...] | None:
        try:
            return tuple(Decimal(c.rstrip("%")) for c in self.cells)
        except InvalidOperation:
            return None


def columns(truth: dict) -> list[Column]:
    """The page's columns of values (a chart's series; a table's columns after the first)."""
    if truth["kind"] == "chart":
        series = truth["series"] if truth["chart"] != "scatter" else truth["series"][1:]  # a scatter: its y values
        multi = len(truth["series"]) > 1  # a scatter's y values are named by their axis
        suffix = "%" if truth["chart"] == "pie" else ""
        return [Column(tuple(truth["categories"]), tuple(f"{v}{suffix}" for v in s["values"]),
                       "What value does the chart show for {name}"
                       + (f" in the {s['name']} series?" if multi and truth["chart"] != "scatter" else "?"),
                       f"{s['name']} value" if multi else "value", "in the chart",
                       truth["value_labels"], truth["scale"] == "log") for s in series]
    if "rows" not in truth:
        return []
    scope = f"in the {noun(truth)}"
    names = tuple(row[0] for row in truth["rows"])
    drawn = set(headings(truth))
    # a column is named by its heading only where the heading is drawn (a receipt may list its items under
    # none, and then has one column of values: the amount listed beside each item)
    return [Column(names, tuple(row[i] for row in truth["rows"]),
                   f"What does the {noun(truth)} show under {heading} for {{name}}?", heading, scope, True)
            if heading in drawn else
            Column(names, tuple(row[i] for row in truth["rows"]),
                   f"What amount does the {noun(truth)} list beside {{name}}?", "amount listed", scope, True)
            for i, heading in enumerate(truth["columns"]) if i > 0]


# -- Chart Value Retrieval ------------------------------------------------------------------------

def retrieval(truth, _pools, _settings, rng) -> list[Draft]:
    asks = [(column.retrieve.format(name=name), cell, column.cells, {"target": {"name": name}})
            for column in columns(truth) if column.readable and len(set(column.names)) == len(column.names)
            for name, cell in zip(column.names, column.cells)]
    return drafts_of(rng, "retrieval", asks)


# -- Chart Comparison -----------------------------------------------------------------------------

def comparison(truth, _pools, settings, rng) -> list[Draft]:
    drafts = []
    for column in columns(truth):
        numbers = column.numbers()
        if (numbers is None or len(column.names) < 4 or len(set(column.names)) != len(column.names)
                or (column.log_scale and not column.readable)):
            continue
        value, cell = dict(zip(column.names, numbers)), dict(zip(column.names, column.cells))
        visible = 0 if column.readable else Decimal(str(settings.min_gap)) * max(numbers)
        for _ in range(len(column.names)):
            four = rng.sample(column.names, 4)
            for word, best in (("highest", max), ("lowest", min)):
                key = best(four, key=value.__getitem__)
                lead = min(abs(value[key] - value[n]) for n in four if n != key)
                if lead == 0 or lead < visible:
                    continue
                # written values are what the comparison is worked out from: OCR must have read them all
                drafts.append(Draft(f"Which of these has the {word} {column.measure} {column.scope}?",
                                    (key, *(n for n in four if n != key)),
                                    {"template": "comparison", "extreme": word}
                                    | ({"reads": [cell[n] for n in four]} if column.readable else {})))
    return drafts


# -- Chart Arithmetic -----------------------------------------------------------------------------

def _format(value: Decimal, like: Sequence[str]) -> str:
    """A computed value written as the page writes its values (decimals, a percent sign)."""
    places = max((len(c.rstrip("%").partition(".")[2]) for c in like), default=0)
    return f"{value:.{places}f}" + ("%" if like and like[0].endswith("%") else "")


def arithmetic(truth, _pools, _settings, rng) -> list[Draft]:
    drafts = []
    for column in columns(truth):
        numbers = column.numbers()
        if not column.readable or numbers is None or len(set(column.names)) != len(column.names) or len(numbers) < 4:
            continue
        pairs = list(itertools.combinations(range(len(numbers)), 2))
        for operation, words in (("sum", "sum of"), ("difference", "difference between")):
            result = {p: _format(numbers[p[0]] + numbers[p[1]] if operation == "sum"
                                 else abs(numbers[p[0]] - numbers[p[1]]), column.cells) for p in pairs}
            for pair in rng.sample(pairs, min(len(pairs), 4)):
                a, b = (column.names[i] for i in pair)
                # distractors from any other pair: only pairs apart from the asked one put the key at an end
                # of the four (a sum) or in the middle (a difference) more often than chance
                options = four_options(rng, result[pair], [r for p, r in result.items() if p != pair])
                if options is None:
                    continue
                text = f"What is the {words} the {column.measure} for {a} and for {b} {column.scope}?"
                drafts.append(Draft(text, options, {"template": "arithmetic", "operation": operation,
                                                    "reads": [column.cells[i] for i in pair]}))
    return drafts


# -- Chart Text Reading ---------------------------------------------------------------------------

def reading(truth, pools: Pools, _settings, rng) -> list[Draft]:
    shown = [t["text"] for t in truth.get("texts", ())]
    kind = noun(truth)
    asks = [(f"What is the title of the {kind}?", truth["title"], f"title:{kind}", "title")]
    asks += [("Which of these is an entry in the legend of the chart?", entry, f"legend:{kind}", "legend")
             for entry in truth.get("legend", ())]
    asks += [(f"Which of these is a column heading in the {kind}?", heading, f"heading:{kind}", "heading")
             for heading in headings(truth)]
    asks += [(f"What is written for {name} on the {kind}?", value, f"field:{kind}:{name}", "field")
             for name, value in truth.get("fields", {}).items()]
    return drafts_of(rng, "reading", [(text, key, pools.others(role, shown), {"role": ask})
                                      for text, key, role, ask in asks])


# -- Chart Layout ---------------------------------------------------------------------------------

def sequence(truth: dict) -> tuple[tuple[str, ...], str]:
    """The page's entries in the order they are drawn, and the words for going to the next one."""
    if truth["kind"] == "chart":
        # a line chart's periods (months, years) follow each other whatever is drawn: not asked about
        order = {"pie": "going clockwise around the chart", "scatter": "", "line": ""}.get(truth["chart"])
        if order is None:
            order = ("going down the chart" if truth["orientation"] == "horizontal"
                     else "going from left to right across the chart")
        return tuple(truth["categories"]), order
    return tuple(row[0] for row in truth.get("rows", ())), f"going down the {noun(truth)}"


def layout(truth, _pools, _settings, rng) -> list[Draft]:
    names, order = sequence(truth)
    if not order or len(names) < 5 or len(set(names)) != len(names):
        return []
    return drafts_of(rng, "layout", [(f"Which entry comes directly after {here}, {order}?", after,
                                      [n for n in names if n != here], {"relation": "next"})
                                     for here, after in zip(names, names[1:])])


TEMPLATES = {"chart_retrieval": retrieval, "chart_comparison": comparison, "chart_arithmetic": arithmetic,
             "chart_reading": reading, "chart_layout": layout} | textrich_maps.TEMPLATES
ALL_TEMPLATES = TEMPLATES | textrich_web.TEMPLATES  # every drawn page's template by dimension key


def unread_text(draft: Draft, truth: dict, ocr: Sequence[Fact], width: int, height: int) -> str:
    """Which text of the page `draft` shows that no OCR line read, in words ("" when OCR read them all)."""
    drawn: dict[str, list[tuple[float, ...]]] = defaultdict(list)
    for t in truth.get("texts", ()):
        drawn[t["text"]].append(unit_box(width, height, box_px=t["box_px"], model_output=True))
    shown = [("the key", draft.options[0]), *(("the option", o) for o in draft.options[1:]),
             *(("the operand", v) for v in draft.meta.get("reads", ()))]
    shown += [("the question's text", t) for t in drawn if re.search(rf"(?<!\w){re.escape(t)}(?!\w)", draft.text)]
    for what, text in shown:
        if text in drawn and not any(_read(text, box, line) for box in drawn[text] for line in ocr):
            return f"{what} {text!r} was not read by OCR"
    return ""


def _read(text: str, box: tuple[float, ...], line: Fact) -> bool:
    """Whether OCR `line` lies over `box` (half the smaller of the two) and holds `text`'s words in a row."""
    words, read = normalise_text(text).split(), normalise_text(line.text).split()
    return textrich_receipts.over(box, line) and any(read[i:i + len(words)] == words for i in range(len(read)))


def page_truth(item: Image, dimension: Dimension) -> dict | None:
    """The structure of a page of a kind the dimension asks about."""
    truth = item.annotations.get("truth") or {}
    return truth if truth.get("kind") in GROUP_KINDS.get(dimension.group, ()) else None


def generate(item: Image, dimension: Dimension, pools: Pools, settings: TextRichSettings,
             seed: int = 0, ocr: Sequence[Fact] = ()) -> list[Question]:
    """Up to `settings.per_dimension` questions about a text-rich page; none about another image. `ocr`:
    the lines an OCR extractor read on the page, which limit them under `only_ocr_text`."""
    if (truth := page_truth(item, dimension)) is None:
        return []
    rng = random.Random(stable_hash(seed, item.id, dimension.id))
    receipt = truth["kind"] == textrich_receipts.KIND  # a real scan: its own templates and its own reading test
    template = (textrich_receipts.TEMPLATES if receipt else ALL_TEMPLATES).get(dimension.key)
    drafts = template(truth, pools, settings, rng) if template else []
    if settings.only_ocr_text and ocr:
        unread = textrich_receipts.unread_text if receipt else unread_text
        drafts = [replace(d, dropped=why, rule="text_not_read")
                  if (why := unread(d, truth, ocr, item.width, item.height)) else d for d in drafts]
    return questions_from(drafts, item, dimension, settings, rng, seed, BACKEND, VERSION)


class TextRichStage(QuestionStage):
    """Template questions about rendered charts, tables, documents, maps and web pages, from the truth they
    were drawn from."""

    generator = "textrich"
    settings_model = TextRichSettings

    version = VERSION

    def supports(self, dimension: Dimension) -> bool:
        return dimension.key in ALL_TEMPLATES

    def prepare(self, context: runner.StageContext, jobs: Sequence[Job]) -> None:
        self.pools = Pools.of([item.annotations.get("truth") or {} for item in context.store.get_items(kind="image")])

    def process(self, jobs: Sequence[Job], context: runner.StageContext) -> Iterator[tuple[Job, Outcome]]:
        for job, facts in self._with_facts(jobs, context):
            ocr = [f for f in facts if f.kind == "ocr" and f.provenance.backend != "supplied"]
            if self.own.only_ocr_text and not ocr and textrich_receipts.asks(job.item, job.dimension):
                # a scan's transcripts are asked about once OCR confirms them: its jobs wait for `extract`
                yield job, Outcome(failure=WAITING_FOR_FACTS, finished=False)
                continue
            yield job, Outcome(generate(job.item, job.dimension, self.pools, self.own, self.options.seed, ocr))
