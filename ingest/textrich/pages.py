"""Tables and documents drawn as pages with Pillow in a real TrueType font: data tables and schedules
(`table`), invoices, receipts and forms (`document`).

Every text is drawn once at a known place, so its OCR line box is the box Pillow drew its ink in; each
carries its role (title, column heading, cell with its row and column, field name or value). A page is
drawn on a tall canvas and cut below its last line.
"""

from __future__ import annotations

import random
from decimal import ROUND_HALF_UP, Decimal

from PIL import Image, ImageDraw

from ingest.textrich import font, page_data, row_of, value_rows

INK = (25, 25, 25)
PAPERS = ((255, 255, 255), (250, 247, 240), (245, 248, 252))
HEADS = ((215, 228, 242), (226, 239, 218), (242, 230, 210), (230, 230, 230))
TABLE_STYLES = ("grid", "zebra", "rules")
MARGIN, PAD = 28, 8


class Page:
    """A canvas being written on: each `put` draws a text and keeps it with its role and ink box."""

    def __init__(self, width: int, rng: random.Random, height: int = 1400) -> None:
        self.width, self.rng = width, rng
        self.paper = rng.choice(PAPERS)
        self.image = Image.new("RGB", (width, height), self.paper)
        self.draw = ImageDraw.Draw(self.image)
        self.texts: list[dict] = []
        self.size = rng.randint(15, 18)
        self.font, self.big = font(self.size), font(self.size + rng.randint(7, 11))

    def measure(self, text: str, font=None) -> tuple[int, int]:
        left, top, right, bottom = self.draw.textbbox((0, 0), text, font=font or self.font)
        return right - left, bottom - top

    def put(self, xy: tuple[float, float], text: str, role: str, font=None, anchor: str = "la", **about) -> list[float]:
        font = font or self.font
        self.draw.text(xy, text, fill=INK, font=font, anchor=anchor)
        box = list(self.draw.textbbox(xy, text, font=font, anchor=anchor))
        self.texts.append({"role": role, "text": text, "box_px": box} | about)
        return box

    def table(self, y: int, columns: list[str], rows: list[list[str]], numeric: set[int], heading: bool = True) -> int:
        """Draw a table from y with its column headings (when `heading`); return the y below it."""
        style, head = self.rng.choice(TABLE_STYLES), self.rng.choice(HEADS)
        widths = [max(self.measure(t)[0] for t in [c, *(r[i] for r in rows)]) + 2 * PAD + 6
                  for i, c in enumerate(columns)]
        spare = (self.width - 2 * MARGIN - sum(widths)) // len(widths)
        widths = [w + max(spare, 0) for w in widths]
        line_h = self.size + 2 * PAD + 4
        xs = [MARGIN + sum(widths[:i]) for i in range(len(widths) + 1)]
        body = [None, *rows] if heading else rows
        for r, row in enumerate(body):
            top = y + r * line_h
            if row is None:
                self.draw.rectangle((xs[0], top, xs[-1], top + line_h), fill=head)
            elif style == "zebra" and r % 2 == 0:
                self.draw.rectangle((xs[0], top, xs[-1], top + line_h), fill=tuple(c - 12 for c in self.paper))
            for c, width in enumerate(widths):
                text = columns[c] if row is None else row[c]
                right = c in numeric and row is not None
                x = xs[c + 1] - PAD if right else xs[c] + PAD
                about = {"column": c} if row is None else {"row": r - heading, "column": c}
                self.put((x, top + line_h / 2), text, "column_heading" if row is None else "cell",
                         anchor="rm" if right else "lm", **about)
            if style != "zebra":
                self.draw.line((xs[0], top + line_h, xs[-1], top + line_h), fill=(120, 120, 120), width=1)
        bottom = y + len(body) * line_h
        if style == "grid":
            self.draw.rectangle((xs[0], y, xs[-1], bottom), outline=(90, 90, 90), width=1)
            for x in xs[1:-1]:
                self.draw.line((x, y, x, bottom), fill=(90, 90, 90), width=1)
        return bottom

    def field(self, x: float, y: float, name: str, value: str, anchor: str = "la") -> None:
        """'Name: value' on one line, from x (or ending at x, with anchor 'ra')."""
        label = f"{name}:"
        gap = self.measure(" ")[0] + 4
        if anchor == "ra":
            box = self.put((x, y), value, "field_value", anchor="ra", field=name)
            self.put((box[0] - gap, y), label, "field_name", anchor="ra", field=name)
        else:
            box = self.put((x, y), label, "field_name", field=name)
            self.put((box[2] + gap, y), value, "field_value", field=name)

    def cut(self, bottom: float) -> Image.Image:
        return self.image.crop((0, 0, self.width, int(bottom) + MARGIN))


def _money(value: Decimal) -> str:
    return str(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def _date(rng: random.Random, year: int = 2026) -> str:
    return f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def render_table(rng: random.Random) -> tuple[Image.Image, dict]:
    """A data table (a theme's categories by its series) or a schedule (departures)."""
    data, page = page_data(), Page(640, rng)
    if rng.random() < 0.5:
        layout, theme = "table", rng.choice(data["themes"])
        names = rng.sample(theme["series"], rng.randint(2, 3))
        rows = value_rows(rng, theme, rng.sample(theme["categories"], rng.randint(4, 7)), names)
        columns = [theme["axis"].split(" (")[0] if rng.random() < 0.3 else "Name", *names]
        title, numeric = theme["title"], set(range(1, len(columns)))
    else:
        layout, schedule = "schedule", rng.choice(data["schedules"])
        places = rng.sample(schedule["places"], rng.randint(4, 7))
        minutes = sorted(rng.sample(range(6 * 60, 22 * 60, 5), len(places)))
        platforms = rng.sample(range(1, 15), len(places))
        rows = [[p, f"{m // 60:02d}:{m % 60:02d}", str(n), rng.choice(schedule["status"])]
                for p, m, n in zip(places, minutes, platforms)]
        columns, title, numeric = list(schedule["columns"]), schedule["title"], {1, 2}
    page.put((MARGIN, MARGIN), title, "title", font=page.big)
    bottom = page.table(MARGIN + page.big.size + 18, columns, rows, numeric)
    truth = {"kind": "table", "layout": layout, "title": title, "columns": columns, "rows": rows}
    caption = (f"A {'table' if layout == 'table' else 'timetable'} titled \"{title}\" with columns {', '.join(columns)} "
               f"and rows for {', '.join(row[0] for row in rows)}.")
    return page.cut(bottom), row_of(caption, page.texts, truth)


def render_document(rng: random.Random) -> tuple[Image.Image, dict]:
    """An invoice, a receipt or a form."""
    return rng.choice((_invoice, _receipt, _form))(rng)


def _items(rng: random.Random, low: int, high: int) -> list[tuple[str, Decimal]]:
    """Between `low` and `high` products, each with a price drawn for this page (no two alike)."""
    data = page_data()
    names = rng.sample(data["products"], rng.randint(low, high))
    cheapest, dearest = data["price_cents"]
    return [(name, Decimal(cents) / 100) for name, cents in zip(names, rng.sample(range(cheapest, dearest + 1, 5),
                                                                                  len(names)))]


def _invoice(rng: random.Random) -> tuple[Image.Image, dict]:
    data, page = page_data(), Page(640, rng)
    company, customer = rng.choice(data["companies"]), rng.choice(data["customers"])
    page.put((MARGIN, MARGIN), company, "title", font=page.big)
    page.put((page.width - MARGIN, MARGIN), "INVOICE", "heading", font=page.big, anchor="ra")
    fields = {"Invoice No": f"INV-{rng.randint(1000, 9999)}", "Date": _date(rng), "Bill To": customer}
    y = MARGIN + page.big.size + 20
    for i, (name, value) in enumerate(fields.items()):
        page.field(MARGIN, y + i * (page.size + 10), name, value)
    items = [(name, rng.randint(1, 5), price) for name, price in _items(rng, 4, 6)]
    rows = [[name, str(qty), _money(price), _money(qty * price)] for name, qty, price in items]
    bottom = page.table(y + 3 * (page.size + 10) + 14, ["Item", "Qty", "Price", "Amount"], rows, {1, 2, 3})
    subtotal = sum((qty * price for _n, qty, price in items), Decimal(0))
    tax = (subtotal * Decimal("0.1")).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    totals = {"Subtotal": _money(subtotal), "Tax": _money(tax), "Total": _money(subtotal + tax)}
    for i, (name, value) in enumerate(totals.items()):
        page.field(page.width - MARGIN - PAD, bottom + 14 + i * (page.size + 10), name, value, anchor="ra")
    truth = {"kind": "document", "layout": "invoice", "title": company, "fields": fields | totals,
             "columns": ["Item", "Qty", "Price", "Amount"], "rows": rows}
    return page.cut(bottom + 14 + 3 * (page.size + 10)), row_of(
        f"An invoice from {company} to {customer} for {', '.join(row[0] for row in rows)}.", page.texts, truth)


def _receipt(rng: random.Random) -> tuple[Image.Image, dict]:
    data, page = page_data(), Page(400, rng)
    shop = rng.choice(data["shops"])
    page.put((page.width / 2, MARGIN), shop, "title", font=page.big, anchor="ma")
    fields = {"Date": _date(rng)}
    y = MARGIN + page.big.size + 16
    page.field(MARGIN, y, "Date", fields["Date"])
    items = _items(rng, 4, 7)
    rows = [[name, _money(price)] for name, price in items]
    bottom = page.table(y + page.size + 18, ["Item", "Price"], rows, {1}, heading=rng.random() < 0.5)
    fields["Total"] = _money(sum((price for _n, price in items), Decimal(0)))
    page.field(page.width - MARGIN - PAD, bottom + 14, "Total", fields["Total"], anchor="ra")
    truth = {"kind": "document", "layout": "receipt", "title": shop, "fields": fields, "columns": ["Item", "Price"],
             "rows": rows}
    return page.cut(bottom + 14 + page.size + 6), row_of(f"A receipt from {shop} for {', '.join(row[0] for row in rows)}.",
                                                         page.texts, truth)


def _form(rng: random.Random) -> tuple[Image.Image, dict]:
    data, page = page_data(), Page(640, rng)
    form = rng.choice(data["forms"])
    values = {"Full Name": rng.choice(data["customers"]), "Date of Birth": _date(rng, rng.randint(1950, 2005)),
              "City": rng.choice(data["cities"]), "Phone": f"0{rng.randint(100, 999)} {rng.randint(100000, 999999)}",
              "Member Number": str(rng.randint(10000, 99999)), "Plan": rng.choice(data["plans"]),
              "Doctor": rng.choice(data["doctors"]), "Blood Type": rng.choice(data["blood_types"])}
    page.put((MARGIN, MARGIN), form["title"], "title", font=page.big)
    fields = {name: values[name] for name in form["fields"]}
    column_width = (page.width - 2 * MARGIN) // 2
    y0 = MARGIN + page.big.size + 24
    block = page.size * 2 + 30
    for i, (name, value) in enumerate(fields.items()):
        x, y = MARGIN + (i % 2) * column_width, y0 + (i // 2) * block
        page.put((x, y), name, "field_name", field=name)
        page.draw.rectangle((x, y + page.size + 6, x + column_width - 16, y + 2 * page.size + 22),
                            outline=(110, 110, 110), width=1)
        page.put((x + PAD, y + page.size + 14), value, "field_value", field=name)
    truth = {"kind": "document", "layout": "form", "title": form["title"], "fields": fields}
    return page.cut(y0 + (len(fields) + 1) // 2 * block), row_of(
        f"A filled-in form titled \"{form['title']}\" with the fields {', '.join(fields)}.", page.texts, truth)
