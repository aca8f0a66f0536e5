"""Scanned receipts in the ICDAR 2019 SROIE layout, as an ingest source.

A receipts folder holds `img/NAME.jpg` (or .jpeg, .png), `box/NAME.csv` and optionally `key/NAME.json`:
- each line of `box/NAME.csv` is one printed line, `x1,y1,x2,y2,x3,y3,x4,y4,transcript`: its pixel quad
  (clockwise from the top left) and its text (which may itself hold commas);
- `key/NAME.json` holds the receipt's key fields (SROIE: company, date, address, total) as strings.

`benchsmith ingest FOLDER` reads such a folder when it has `img/` and `box/` beside each other. Each
receipt becomes an image whose transcripts are supplied OCR lines (a quad's pixel bounds as the line's
box) and whose `truth` (kind `scanned_receipt`) keeps the key fields and every line with its box and
order, for the text-rich generator. A receipt whose files cannot be read as that layout (a missing
image, a line without eight whole numbers or without text, a file that is not UTF-8, a key file that is
not a JSON object of strings, a file reached through a link leaving the folder) is refused as a whole
with its reason (`bad_receipt`, `missing`, `escapes_root`), never read in part.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from benchsmith.images import Rejected
from benchsmith.records import stable_hash
from ingest.annotations import has_markup
from ingest.candidates import Candidate, file_problem, file_version, inside, read_regular_file

KIND = "scanned_receipt"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
MAX_TEXT_BYTES = 1 << 20  # a transcript or key file larger than this is not a receipt's
# what the page is, for the caption-richness rule; it names no field, so it gives no answer away
CAPTION = ("A scanned shop receipt: the shop's name and address, the date, the items bought with their prices, "
           "and the total.")


def is_receipts_folder(location: Path) -> bool:
    return (location / "img").is_dir() and (location / "box").is_dir()


class BadReceipt(ValueError):
    pass


def _text(path: Path, root: Path) -> str:
    """A transcript or key file's text; BadReceipt naming the file and the problem."""
    rel = path.relative_to(root)
    if not inside(root, path):
        raise BadReceipt(f"{rel} leaves the folder {root}")
    data = read_regular_file(path, MAX_TEXT_BYTES)
    if isinstance(data, Rejected):
        raise BadReceipt(f"{rel}: {data.reason}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise BadReceipt(f"{rel} line {line} is not UTF-8 text (byte 0x{data[exc.start]:02x}); "
                         "save it as UTF-8") from None


def parse_lines(text: str, rel: str) -> list[dict]:
    """The printed lines of a box file: text and pixel box (the bounds of its quad), in file order."""
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        parts = raw.split(",", 8)
        if len(parts) < 9:
            raise BadReceipt(f"{rel} line {number} has {len(parts)} fields; want x1,y1,...,x4,y4,transcript")
        try:
            numbers = [int(p) for p in parts[:8]]
        except ValueError:
            corners = ",".join(parts[:8])
            raise BadReceipt(f"{rel} line {number}: the corners {corners!r} are not whole numbers") from None
        transcript = " ".join(parts[8].split())
        if not transcript:
            raise BadReceipt(f"{rel} line {number} has no transcript")
        xs, ys = numbers[0::2], numbers[1::2]
        if min(xs) < 0 or min(ys) < 0 or max(xs) == min(xs) or max(ys) == min(ys):
            raise BadReceipt(f"{rel} line {number}: the quad {numbers} is not a box of positive size on the page")
        lines.append({"text": transcript, "box_px": [min(xs), min(ys), max(xs), max(ys)]})
    return lines


def parse_key(text: str, rel: str) -> dict[str, str]:
    try:
        key = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadReceipt(f"{rel} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(key, dict) or not all(isinstance(v, str) for v in key.values()):
        raise BadReceipt(f"{rel} must be a JSON object of text fields (company, date, address, total)")
    return {str(name): " ".join(value.split()) for name, value in key.items() if value.strip()}


def receipt_annotations(lines: list[dict], fields: dict[str, str]) -> dict:
    """A receipt's supplied annotations: its lines as OCR lines, and its truth for the text-rich generator."""
    texts = [{"role": "line", "line": i, "text": line["text"], "box_px": line["box_px"]}
             for i, line in enumerate(lines)]
    # a printed "<THANK YOU>" reads as markup, which no supplied text may hold: the line stays in the truth
    # (it is printed there) but never becomes an OCR fact or question text
    marked = [t for t in texts if has_markup(t["text"])]
    for t in marked:
        t["markup"] = True
    ocr = [{"text": t["text"], "box_px": t["box_px"]} for t in texts if t not in marked]
    return {"captions": [CAPTION], "ocr": ocr,
            "truth": {"kind": KIND, "fields": fields, "texts": texts},
            "dropped": [{"kind": "ocr", "rule": "markup", "text": t["text"], "reason": "holds markup (an HTML tag)"} for t in marked]}


def receipt_candidates(root: Path, *, source: str = "", license: str = "") -> Iterator[Candidate]:
    """One candidate per receipt (per name found under img/ or box/), in name order."""
    root = root.resolve()
    images = {p.stem: p for p in (root / "img").iterdir() if p.suffix.lower() in IMAGE_SUFFIXES}
    boxes = {p.stem: p for p in (root / "box").iterdir() if p.suffix.lower() == ".csv"}
    source = source or root.name
    for stem in sorted(images.keys() | boxes.keys()):
        image, box, key = images.get(stem), boxes.get(stem), root / "key" / f"{stem}.json"
        name = str(image.relative_to(root)) if image else f"box/{stem}.csv"
        version = stable_hash(*(file_version(p) for p in (image or root, box or root, key)))
        refused = None
        if image is None:
            refused = Rejected("missing", f"box/{stem}.csv has no image img/{stem}.jpg")
        elif box is None:
            refused = Rejected("bad_receipt", f"{name} has no transcripts box/{stem}.csv")
        elif not inside(root, image):
            refused = Rejected("escapes_root", f"{name} leaves the folder {root}")
        else:
            refused = file_problem(image)
        annotations = {}
        if refused is None:
            try:
                lines = parse_lines(_text(box, root), f"box/{stem}.csv")
                fields = parse_key(_text(key, root), f"key/{stem}.json") if key.exists() or key.is_symlink() else {}
                annotations = receipt_annotations(lines, fields)
            except BadReceipt as exc:
                refused = Rejected("bad_receipt", str(exc))
        yield Candidate(name, None if refused else partial(read_regular_file, image), source=source, license=license,
                        annotations=annotations, refused=refused, version=version)
