"""Exact questions about scanned receipts (`ingest.receipts`) from their key fields and printed lines; the
`textrich` generator asks them in the `charts` group of dimensions:
- value retrieval (16): the shop's name, the date, the total, where the receipt prints the key field's
  value within one line (an address runs over several lines and a total can lose its currency sign: such
  a field is not asked);
- text reading (19): which of four lines is printed on the receipt;
- layout (20): which of four of its lines is printed highest up, or lowest down.

The options alone must say nothing, and on real receipts each value belongs to one receipt, so a value
shown as the key here and as a distractor there would be found by a text-only model that counts how
often each option was the key elsewhere. So every option text is shown at most once over the collection
(`design`): a field's distinct values, in an order fixed by their hashes, fall into fours of the same
format (a date's or a total's digits and letters, e.g. `99/99/9999`, `$9.99`), the first of each four
asked on a receipt that prints it and the other three (other receipts' values, none printed on this one)
its distractors; lines printed on one receipt only fall into fours of the same shape (letters, digits,
length) alike. A layout question's options are four lines of its own receipt from one stretch of it (so
a shop's name is not set against an item), none printed on another receipt ("CASH" comes before
"CHANGE" on every receipt), the key ahead of the next by a clear line's height.

Under `only_ocr_text`, a question is asked only when OCR read on the scan every text it shows there (a
field's value, the key line, a layout question's four lines): an OCR line over where the text is printed
holds it (`unread_text`).
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections import defaultdict
from collections.abc import Sequence

from benchsmith.geometry import unit_box
from benchsmith.records import Fact, stable_hash
from benchsmith.similarity import matching_ratio
from generators.programmatic import Draft
from ingest.receipts import KIND

FIELD_QUESTIONS = {"company": "Which shop or company issued this receipt?",
                   "date": "What date is printed on the receipt?",
                   "total": "What is the total amount of the receipt?"}
SIMILAR = 0.75         # a distractor this like a line printed on the receipt (letters and digits) is not used
WINDOW = 6             # a layout question's four lines come from this many lines in a row
MIN_CHARS = 5          # a line with fewer letters and digits is not asked about ("PAX:", "SWH")


def canonical(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def holds(line: str, value: str) -> bool:
    """Whether `line` prints `value` whole: not inside a longer word or number ('9.00' in 'RM9.00' and
    'TOTAL 9.00', not in '19.00'; 'ABC' in 'ABC SDN BHD', not in 'ABCD')."""
    line, value = canonical(line), canonical(value)
    if not value:
        return False
    for found in re.finditer(re.escape(value), line):
        before = line[found.start() - 1] if found.start() else " "
        after = line[found.end()] if found.end() < len(line) else " "
        if not (_joins(before, value[0]) or _joins(after, value[-1])):
            return True
    return False


def _joins(neighbour: str, edge: str) -> bool:
    """Whether a character next to a value would make it part of a longer word or number."""
    if edge.isdigit():
        return neighbour.isdigit() or neighbour in ".,"
    return edge.isalnum() and neighbour.isalnum()


def shape(value: str) -> str:
    """A value's format: digits as 9, letters as A ('25/12/2018' -> '99/99/9999', 'RM9.00' -> 'AA9.99')."""
    return re.sub(r"[^\W\d_]", "A", re.sub(r"\d", "9", canonical(value).upper()))


def receipt_id(truth: dict) -> str:
    return stable_hash(truth.get("fields"), [t["text"] for t in truth["texts"]], length=16)


def _lines(truth: dict) -> list[dict]:
    """The lines questions may show: printed text (never markup) with enough letters or digits."""
    return [t for t in truth["texts"] if not t.get("markup") and sum(c.isalnum() for c in t["text"]) >= MIN_CHARS]


def bare(text: str) -> str:
    """Letters and digits only, case folded."""
    return "".join(c for c in canonical(text) if c.isalnum())


def _printed(value: str, truth: dict) -> bool:
    """Whether the receipt prints `value`, even inside a longer line or spaced otherwise ('JOHOR.' in
    '81100 JOHOR BAHRU'), or a line much like it ('COUNTER :002' beside 'COUNTER: 001'), so it cannot be
    a wrong option there. (A longer option holding a printed line, 'TOTAL AMOUNT' where 'TOTAL' is printed,
    is not printed: refusing it would leave long lines out of the distractors and make the key the
    longest option.)"""
    want = bare(value)
    for t in truth["texts"]:
        line = bare(t["text"])
        if want in line:
            return True
        # the ratio is at most 2 * the shorter length over both: only strings of near length can reach it
        if 2 * min(len(want), len(line)) >= SIMILAR * (len(want) + len(line)) and matching_ratio(want, line) >= SIMILAR:
            return True
    return False


def _fours(units: list[tuple[str, str, dict]]) -> list[tuple[str, tuple[str, str, str, str]]]:
    """Units (text, group, the receipt it would be asked on), ordered by hash, as fours of one group:
    (receipt id, options with the key first). Each unit is used once."""
    by_group: dict[str, list] = defaultdict(list)
    for unit in sorted(units, key=lambda u: stable_hash(u[1], canonical(u[0]))):
        by_group[unit[1]].append(unit)
    fours = []
    for pending in by_group.values():
        while pending:
            head = pending.pop(0)
            others = []
            for unit in pending:
                if not _printed(unit[0], head[2]):
                    others.append(unit)
                if len(others) == 3:
                    break
            if len(others) < 3:
                break
            for unit in others:
                pending.remove(unit)
            fours.append((receipt_id(head[2]), (head[0], *(u[0] for u in others))))
    return fours


def design(truths: Sequence[dict]) -> dict:
    """Every receipt question's options over the collection (`truths`: every item's truth; others are
    ignored): {"field:NAME" | "line": {receipt id: [options, ...]}, "common": the lines printed on more than
    one receipt}."""
    receipts = [t for t in truths if t.get("kind") == KIND]
    out: dict[str, dict[str, list]] = {}
    for name in FIELD_QUESTIONS:
        holders: dict[str, list[dict]] = defaultdict(list)
        values: dict[str, str] = {}
        for truth in receipts:
            value = truth["fields"].get(name, "")
            if value:
                values.setdefault(canonical(value), value)
                if any(holds(t["text"], value) for t in truth["texts"] if not t.get("markup")):
                    holders[canonical(value)].append(truth)
        # only values some receipt prints in one line: the others (a name over two lines, a total keyed without
        # its currency sign) differ in kind, and as distractors alone they would set the key apart
        units = [(value, "" if name == "company" else shape(value), min(holders[c], key=receipt_id))
                 for c, value in values.items() if holders[c]]
        out[f"field:{name}"] = _grouped(_fours(units))
    seen: dict[str, set[str]] = defaultdict(set)  # each line's letters and digits: the receipts printing them
    for truth in receipts:
        for t in _lines(truth):
            seen[bare(t["text"])].add(receipt_id(truth))
    units = [(t["text"], _line_group(t["text"]), truth) for truth in receipts for t in _lines(truth)
             if len(seen[bare(t["text"])]) == 1]
    out["line"] = _grouped(_fours(_first_each(units)))
    out["common"] = {text for text, where in seen.items() if len(where) > 1}
    return out


def _first_each(units: list) -> list:
    """One unit per text (a line printed twice on one receipt is one text)."""
    kept: dict[str, tuple] = {}
    for unit in units:
        kept.setdefault(bare(unit[0]), unit)
    return list(kept.values())


def _line_group(text: str) -> str:
    letters, digits = any(c.isalpha() for c in text), any(c.isdigit() for c in text)
    return f"{'A' if letters else ''}{'9' if digits else ''}:{min(len(text) // 8, 4)}"


def _grouped(fours: list) -> dict[str, list]:
    out: dict[str, list] = defaultdict(list)
    for receipt, options in fours:
        out[receipt].append(options)
    return dict(out)


# -- templates --------------------------------------------------------------------------------------

def retrieval(truth, pools, _settings, _rng) -> list[Draft]:
    here = receipt_id(truth)
    return [Draft(question, options, {"template": "receipt_field", "field": name, "shows": [options[0]]})
            for name, question in FIELD_QUESTIONS.items()
            for options in pools.receipts.get(f"field:{name}", {}).get(here, ())]


def reading(truth, pools, _settings, _rng) -> list[Draft]:
    return [Draft("Which of these lines is printed on the receipt?", options,
                  {"template": "receipt_line", "shows": [options[0]]})
            for options in pools.receipts.get("line", {}).get(receipt_id(truth), ())]


def layout(truth, pools, _settings, rng: random.Random) -> list[Draft]:
    # lines printed on other receipts too ("CASH", "CHANGE", "THANK YOU") have an order anyone can guess
    common, seen = pools.receipts.get("common", set()), defaultdict(int)
    for t in truth["texts"]:
        seen[bare(t["text"])] += 1
    lines = sorted((t for t in _lines(truth) if seen[bare(t["text"])] == 1 and bare(t["text"]) not in common),
                   key=lambda t: t["box_px"][1])
    drafts = []
    for start in range(0, max(len(lines) - WINDOW + 1, 0), WINDOW // 2):
        four = rng.sample(lines[start:start + WINDOW], 4)
        for word, sign in (("highest up", 1), ("lowest down", -1)):
            ordered = sorted(four, key=lambda t: sign * t["box_px"][1])
            height = max(t["box_px"][3] - t["box_px"][1] for t in four)
            if sign * (ordered[1]["box_px"][1] - ordered[0]["box_px"][1]) >= height:
                drafts.append(Draft(f"Which of these lines is printed {word} on the receipt?",
                                    tuple(t["text"] for t in ordered),
                                    {"template": "receipt_layout", "extreme": word,
                                     "shows": [t["text"] for t in ordered]}))
    return drafts


TEMPLATES = {"chart_retrieval": retrieval, "chart_reading": reading, "chart_layout": layout}


def asks(item, dimension) -> bool:
    """Whether the dimension has questions about this item, a scanned receipt."""
    return (item.annotations.get("truth") or {}).get("kind") == KIND and dimension.key in TEMPLATES


def unread_text(draft: Draft, truth: dict, ocr: Sequence[Fact], width: int, height: int) -> str:
    """Which text `draft` shows on the receipt OCR did not read where it is printed ("" when it read them
    all): the OCR lines over a place it is printed, left to right, hold it (`reads`)."""
    for text in draft.meta["shows"]:
        boxes = [unit_box(width, height, box_px=t["box_px"], model_output=True)
                 for t in truth["texts"] if holds(t["text"], text)]
        if not any(reads(" ".join(line.text for line in sorted((o for o in ocr if over(box, o)),
                                                                 key=lambda o: min(x for x, _y in o.quad))), text)
                   for box in boxes):
            return f"{'the key' if text == draft.options[0] else 'the option'} {text!r} was not read by OCR"
    return ""


def reads(read: str, text: str) -> bool:
    """Whether OCR's `read` holds `text`: whole, or, for a text of MIN_CHARS letters and digits or more,
    its letters and digits in a row whatever the spacing and punctuation ('DATE:15/01/2018' holds
    'DATE : 15/01/2018'; a short number must stand whole: '9.00' is not read in '19.00')."""
    return holds(read, text) or (len(bare(text)) >= MIN_CHARS and bare(text) in bare(read))


def over(box: Sequence[float], line: Fact) -> bool:
    """Whether OCR `line` lies over `box` by half the smaller of the two."""
    xs, ys = [x for x, _y in line.quad], [y for _x, y in line.quad]
    left, top, right, bottom = max(box[0], min(xs)), max(box[1], min(ys)), min(box[2], max(xs)), min(box[3], max(ys))
    overlap = max(0.0, right - left) * max(0.0, bottom - top)
    smaller = min((box[2] - box[0]) * (box[3] - box[1]), (max(xs) - min(xs)) * (max(ys) - min(ys)))
    return 0 < smaller <= 2 * overlap
