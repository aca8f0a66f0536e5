"""Questions about real scanned receipts (SROIE, in the shared real data): every key checked against the
receipt's own files by this test's code, options shown once over the collection, nothing asked that OCR
did not read, and the whole path through the installed command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from benchsmith.dimensions import registry
from benchsmith.records import Fact, Image, Provenance
from generators.textrich import Pools, TextRichSettings, generate
from ingest.receipts import receipt_candidates
from tests.support.shared_data import require_shared_data

KEYS = ("chart_retrieval", "chart_reading", "chart_layout")
SAMPLE = 6


def files(root: Path, stem: str) -> tuple[list[tuple[str, list[int]]], dict]:
    """The receipt's printed lines (text, pixel box x1 y1 x2 y2) and key fields, read from its files."""
    import json

    lines = []
    for raw in (root / "box" / f"{stem}.csv").read_text(encoding="utf-8").splitlines():
        if raw.strip():
            parts = raw.split(",", 8)
            xs, ys = [int(v) for v in parts[:8:2]], [int(v) for v in parts[1:8:2]]
            lines.append((parts[8].strip(), [min(xs), min(ys), max(xs), max(ys)]))
    return lines, json.loads((root / "key" / f"{stem}.json").read_text(encoding="utf-8"))


def middle(fact) -> tuple[float, float]:
    return sum(x for x, _y in fact.quad) / 4, sum(y for _x, y in fact.quad) / 4


def bare(text: str) -> str:
    return "".join(c for c in text.casefold() if c.isalnum())


def on_receipt(option: str, lines) -> bool:
    if re.fullmatch(r"[$\d.,]+", option):  # a number: shown whole, not inside a longer one
        return any(re.search(rf"(?<![\d.,]){re.escape(option.lstrip('$'))}(?!\d)", text) for text, _y in lines)
    return any(bare(option) in bare(text) for text, _y in lines)


def check(question: str, options: list[str], key: str, lines, fields: dict) -> None:
    """The key is the one right option, worked out from the question's words and the receipt's files."""
    others = [o for o in options if o != key]
    if question == "Which of these lines is printed on the receipt?":
        assert any(bare(key) == bare(text) for text, _y in lines), (question, key)
    elif "printed highest up" in question or "printed lowest down" in question:
        top = {o: [box[1] for text, box in lines if text == o] for o in options}
        assert all(len(ys) == 1 for ys in top.values()), top
        best = (min if "highest" in question else max)(options, key=lambda o: top[o][0])
        assert best == key, (question, options, key)
        return
    else:
        field = {"Which shop or company issued this receipt?": "company",
                 "What date is printed on the receipt?": "date",
                 "What is the total amount of the receipt?": "total"}[question]
        assert key == fields[field], (question, key, fields[field])
    assert not any(on_receipt(o, lines) for o in others), (question, options, key)


@pytest.fixture(scope="module")
def sroie() -> Path:
    return require_shared_data("sroie", "data")


@pytest.fixture(scope="module")
def receipts(sroie) -> list:
    return [c for c in receipt_candidates(sroie) if not c.refused][:40]


def asked(receipts, settings=TextRichSettings(), ocr=None) -> list[tuple[object, object]]:
    pools = Pools.of([c.annotations["truth"] for c in receipts])
    out = []
    for i, c in enumerate(receipts):
        item = Image(id=f"r{i}", path=c.name, width=1000, height=2000, annotations=c.annotations)
        for key in KEYS:
            read = (ocr or {}).get(c.name, ())
            out += [(c, q) for q in generate(item, registry().get(key), pools, settings, ocr=read)]
    return out


def test_every_key_is_right_by_the_receipts_files_and_every_option_is_shown_once(receipts, sroie):
    questions = asked(receipts)
    templates = Counter(q.meta["template"] for _c, q in questions)
    assert templates.keys() == {"receipt_field", "receipt_line", "receipt_layout"}
    for c, q in questions:
        check(q.text, q.options, q.options[q.answer], *files(sroie, Path(c.name).stem))
    for template in ("receipt_field", "receipt_line"):
        # each value or line is an option of one question: how often a text was the key elsewhere says nothing
        shown = Counter(o for _c, q in questions if q.meta["template"] == template for o in q.options)
        assert shown and max(shown.values()) == 1, shown.most_common(3)


def test_with_only_ocr_text_a_question_showing_a_line_ocr_missed_is_dropped_with_it(receipts):
    c = receipts[0]
    truth = c.annotations["truth"]
    missed = next(q.options[0] for _c, q in asked(receipts) if _c is c and q.meta["template"] == "receipt_layout")
    read = []
    for t in truth["texts"]:  # an OCR line read exactly over each printed line but one
        x1, y1, x2, y2 = t["box_px"][0] / 1000, t["box_px"][1] / 2000, t["box_px"][2] / 1000, t["box_px"][3] / 2000
        if t["text"] != missed:
            read.append(Fact(item_id="r0", kind="ocr", text=t["text"], provenance=Provenance(backend="rapidocr"),
                             quad=((x1, y1), (x2, y1), (x2, y2), (x1, y2))))
    limited = [q for _c, q in asked(receipts, TextRichSettings(only_ocr_text=True), {c.name: read}) if _c is c]
    kept = [q for q in limited if not q.meta.get("dropped")]
    assert kept and all(missed not in q.options for q in kept)
    dropped = [q for q in limited if q.meta.get("drop_rule") == "text_not_read"]
    assert dropped and all(q.meta["dropped"].endswith(f"{missed!r} was not read by OCR") for q in dropped)


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The installed command in the test's workspace (RapidOCR on full scans: minutes on a crowded machine)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "OPENAI"))}
    env["BENCHSMITH_WORKSPACE"] = str(tmp_path / "bench")
    return subprocess.run([str(Path(sys.executable).with_name("benchsmith")), *args], cwd=tmp_path, text=True,
                          env=env, capture_output=True, timeout=1200)


@pytest.mark.slow(seconds=120)  # RapidOCR on 6 scans and the blind filter's solvers
def test_receipts_in_questions_out_through_the_installed_command(sroie, tmp_path):
    from benchsmith.store import Store

    sample = tmp_path / "receipts"
    stems = sorted(p.stem for p in (sroie / "img").glob("*.jpg"))[:SAMPLE]
    for folder, suffix in (("img", ".jpg"), ("box", ".csv"), ("key", ".json")):
        (sample / folder).mkdir(parents=True)
        for stem in stems:  # a scratch copy of a few receipts: a layout of their own, nothing else in it
            shutil.copyfile(sroie / folder / f"{stem}{suffix}", sample / folder / f"{stem}{suffix}")
    ingested = run(tmp_path, "ingest", "receipts")
    assert ingested.returncode == 0 and f"{SAMPLE} added" in ingested.stdout, ingested.stdout + ingested.stderr
    early = run(tmp_path, "generate", "-g", "textrich")  # before OCR has read the scans: their jobs wait
    assert re.search(rf"waiting_for_facts\s+│\s+{SAMPLE * 3} ", early.stdout), early.stdout + early.stderr
    for step in (["extract"], ["generate", "-g", "textrich"], ["filter"]):
        done = run(tmp_path, *step)
        assert done.returncode == 0, done.stdout + done.stderr
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        items = {i.id: i for i in store.get_items(kind="image")}
        questions = [q for q in store.get_questions() if q.meta.get("generator") == "textrich"]
        facts = store.get_facts(sorted(items), kinds=["ocr"])
    kept = [q for q in questions if q.status == "candidate"]
    by_dimension = Counter(registry().get(q.dimension_id).key for q in kept)
    assert by_dimension["chart_reading"] and by_dimension["chart_layout"], by_dimension
    for q in kept:
        lines, fields = files(sroie, Path(items[q.item_id].original_name).stem)
        check(q.text, q.options, q.options[q.answer], lines, fields)
        # the key was read by RapidOCR itself on this scan
        # the key was read by RapidOCR itself on this scan: in the lines it read across where the key is printed
        item, key = items[q.item_id], bare(q.options[q.answer])
        read = [f for f in facts[q.item_id] if f.provenance.backend == "rapidocr"]
        across = [" ".join(f.text for f in sorted((f for f in read if box[1] <= middle(f)[1] * item.height <= box[3]),
                                                  key=lambda f: middle(f)[0]))
                  for text, box in lines if key in bare(text)]
        assert any(key in bare(words) for words in across), (q.text, q.options[q.answer], across)
    assert any(q.meta.get("drop_rule") == "text_not_read" for q in questions)
