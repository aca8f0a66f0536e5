"""Receipt folders in the ICDAR SROIE layout (img/, box/, key/) as an ingest source: what a good receipt
becomes, and a reason for every receipt that cannot be read, through the installed command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from PIL import Image

from benchsmith.store import Store
from ingest.receipts import KIND, receipt_candidates
from tests.generators.test_cli import run

LINES = ["12,10,120,10,120,30,12,30,KEDAI RUNCIT ABU", "12,40,90,40,90,58,12,58,DATE: 01/02/2018",
         "12,70,150,70,150,88,12,88,TOTAL: RM 12.50, CASH"]


def receipt(root: Path, stem: str, lines: list[str] | bytes | None = None, key: dict | str | bytes | None = None,
            image: bool = True) -> None:
    for folder in ("img", "box", "key"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    if image:  # each receipt its own bytes, so none is refused as another's duplicate
        Image.new("RGB", (200, 120), (255, 255 - len(stem), 250)).save(root / "img" / f"{stem}.jpg")
    if lines is not None:
        (root / "box" / f"{stem}.csv").write_bytes(lines if isinstance(lines, bytes) else "\n".join(lines).encode())
    if key is not None:
        data = key if isinstance(key, bytes) else (key if isinstance(key, str) else json.dumps(key)).encode()
        (root / "key" / f"{stem}.json").write_bytes(data)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("receipts") / "sroie"
    receipt(root, "good", LINES, {"company": "KEDAI RUNCIT ABU", "date": "01/02/2018", "total": "12.50"})
    receipt(root, "nokey", LINES[:2])
    receipt(root, "markup", [*LINES, "12,90,150,90,150,100,12,100,<THANK YOU>"], {"total": "12.50"})
    receipt(root, "badnumber", ["12,10,1x0,10,120,30,12,30,KEDAI"], {})
    receipt(root, "short", ["12,10,120,10,KEDAI"], {})
    receipt(root, "notext", ["12,10,120,10,120,30,12,30,  "], {})
    receipt(root, "latin1", "12,10,120,10,120,30,12,30,CAF\xc9".encode("latin-1"), {})
    receipt(root, "badkey", LINES, "{not json")
    receipt(root, "listkey", LINES, '["KEDAI"]')
    receipt(root, "noimage", LINES, {}, image=False)
    receipt(root, "nobox", None, {})
    outside = root.parent / "outside.jpg"
    Image.new("RGB", (200, 120), "white").save(outside)
    os.symlink(outside, root / "img" / "escape.jpg")
    (root / "box" / "escape.csv").write_text(LINES[0])
    return root


REFUSED = {"img/badnumber.jpg": ("bad_receipt", "box/badnumber.csv line 1: the corners '12,10,1x0,10,120,30,12,30' "
                                                "are not whole numbers"),
           "img/short.jpg": ("bad_receipt", "box/short.csv line 1 has 5 fields; want x1,y1,...,x4,y4,transcript"),
           "img/notext.jpg": ("bad_receipt", "box/notext.csv line 1 has no transcript"),
           "img/latin1.jpg": ("bad_receipt", "box/latin1.csv line 1 is not UTF-8 text (byte 0xc9); save it as UTF-8"),
           "img/badkey.jpg": ("bad_receipt", "key/badkey.json is not valid JSON"),
           "img/listkey.jpg": ("bad_receipt", "key/listkey.json must be a JSON object of text fields"),
           "box/noimage.csv": ("missing", "box/noimage.csv has no image img/noimage.jpg"),
           "img/nobox.jpg": ("bad_receipt", "img/nobox.jpg has no transcripts box/nobox.csv"),
           "img/escape.jpg": ("escapes_root", "img/escape.jpg leaves the folder")}


def test_a_receipt_is_its_lines_as_supplied_ocr_and_its_key_fields_as_truth(folder):
    good, = [c for c in receipt_candidates(folder) if c.name == "img/good.jpg"]
    assert good.annotations["ocr"][2] == {"text": "TOTAL: RM 12.50, CASH", "box_px": [12, 70, 150, 88]}
    truth = good.annotations["truth"]
    assert truth["kind"] == KIND and truth["fields"] == {"company": "KEDAI RUNCIT ABU", "date": "01/02/2018",
                                                         "total": "12.50"}
    assert [(t["line"], t["text"]) for t in truth["texts"]] == [(0, "KEDAI RUNCIT ABU"), (1, "DATE: 01/02/2018"),
                                                                 (2, "TOTAL: RM 12.50, CASH")]


def test_the_ingest_command_reads_a_receipts_folder_and_refuses_each_bad_receipt_with_its_reason(folder, tmp_path):
    done = run(tmp_path, "ingest", str(folder))
    assert done.returncode == 0, done.stderr
    assert "12 seen, 3 added" in done.stdout, done.stdout
    assert "9 refused (7 bad_receipt, 1 escapes_root, 1 missing)" in done.stdout, done.stdout
    assert "1 supplied boxes dropped (1 ocr markup;" in done.stdout, done.stdout
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        items = {i.original_name: i for i in store.get_items(kind="image")}
        verdicts = {v.subject_id.split(":", 1)[1]: (v.rule, v.reason) for v in store.get_verdicts(stage="ingest")}
    assert set(items) == {"img/good.jpg", "img/nokey.jpg", "img/markup.jpg"}
    assert items["img/nokey.jpg"].annotations["truth"]["fields"] == {}
    markup = items["img/markup.jpg"].annotations
    # the printed "<THANK YOU>" stays in the truth, marked, but is no OCR line: no question can show it
    assert [t.get("markup", False) for t in markup["truth"]["texts"]] == [False, False, False, True]
    assert len(markup["ocr"]) == 3 and markup["dropped"][0]["text"] == "<THANK YOU>"
    assert set(verdicts) == set(REFUSED)
    for name, (rule, reason) in REFUSED.items():
        assert verdicts[name][0] == rule and verdicts[name][1].startswith(reason), (name, verdicts[name])
    again = run(tmp_path, "ingest", str(folder))
    assert "12 seen, 0 added" in again.stdout and "12 unchanged since the last ingest" in again.stdout, again.stdout
