"""Web pages written as HTML and drawn by headless Chromium: product listings, search results, profiles and
data reports, each under a site name, a top menu and buttons (profiles and reports also a side menu).

Every text is one element on one line, kept with its role (title: the site's name, menu, side_menu,
button, query, product, price, rating, result, site, snippet, name, field_name, field_value, heading,
column_heading, cell) and what places it (index, item, rank, row, column, field). The browser measures
each text's box (a Range over its letters, not the element's padding), so every drawn text is an OCR line
with its pixel box, and `truth` also keeps what the page lists: its products, results, fields or table,
its menus and buttons in order.

Each process starts one Chromium when it draws its first page and keeps it for the rest: the DevTools
protocol on a pipe (`--remote-debugging-pipe`) drives it, so no port and no websocket client are needed.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import random
import shutil
import subprocess
import tempfile
from functools import cache
from multiprocessing import util

from PIL import Image

from benchsmith.errors import BenchsmithError
from ingest.textrich import page_data, row_of, value_rows

WIDTH = 960
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--force-device-scale-factor=1", "--remote-debugging-pipe")
INSTALL = ("web pages are drawn by headless Chromium, which is not installed: apt-get install -y chromium "
           "(or set CHROMIUM to its path)")
FONTS = ("DejaVu Sans", "DejaVu Serif", "Liberation Sans", "Liberation Serif")
ACCENTS = ("#1f4e8c", "#2d6a3e", "#6b2d7a", "#8c3b1f", "#225c66", "#333333")
# each text's box: a Range over its letters, by the index in its data-t attribute
MEASURE = """(() => { const boxes = [];
  for (const e of document.querySelectorAll('[data-t]')) {
    const range = document.createRange(); range.selectNodeContents(e); const b = range.getBoundingClientRect();
    boxes[+e.dataset.t] = [b.left, b.top, b.right, b.bottom]; }
  return {boxes, height: Math.ceil(document.body.getBoundingClientRect().bottom)}; })()"""


def chromium() -> str | None:
    """The Chromium to draw with: $CHROMIUM, else `chromium` on the PATH; None when there is none."""
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return path if path and os.access(path, os.X_OK) else None


def missing() -> str | None:
    """Why web pages cannot be drawn here, in one line; None when they can."""
    return None if chromium() else INSTALL


class Browser:
    """One headless Chromium with one tab, driven over the DevTools protocol: JSON messages ending in NUL
    on the pipes it reads on fd 3 and answers on fd 4. It quits when the pipe closes, so it never
    outlives the process that started it."""

    def __init__(self, executable: str) -> None:
        # Chromium aborts when the path of the socket it makes under $TMPDIR outgrows a unix socket's 107 bytes
        temp = tempfile.gettempdir() if len(tempfile.gettempdir()) <= 50 else "/tmp"
        self.profile = tempfile.mkdtemp(prefix="benchsmith-chromium-", dir=temp)
        commands, self._commands = os.pipe()
        self._replies, replies = os.pipe()

        def on_fds() -> None:  # in the child: its ends at 3 and 4, kept open through exec
            os.dup2(commands, 3), os.dup2(replies, 4)
            os.set_inheritable(3, True), os.set_inheritable(4, True)

        self.process = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                        preexec_fn=on_fds, close_fds=False, env=os.environ | {"TMPDIR": temp},
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(commands), os.close(replies)
        self._sent, self._read, self.session = 0, b"", None
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.frame = self.call("Page.getFrameTree")["frameTree"]["frame"]["id"]
            self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=200, deviceScaleFactor=1, mobile=False)
        except BaseException:
            self.close()
            raise

    def call(self, method: str, **params) -> dict:
        """Send one command (to the tab, once attached) and return its result; events are skipped."""
        self._sent += 1
        message = {"id": self._sent, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._read:
                chunk = os.read(self._replies, 1 << 20)
                if not chunk:
                    raise BenchsmithError(f"Chromium quit (exit code {self.process.wait()}) at {method}")
                self._read += chunk
            line, _, self._read = self._read.partition(b"\0")
            reply = json.loads(line)
            if reply.get("id") == self._sent:
                if "error" in reply:
                    raise RuntimeError(f"Chromium: {method}: {reply['error']}")
                return reply["result"]

    def draw(self, page: str) -> tuple[Image.Image, list[list[float]]]:
        """The page drawn at WIDTH and as tall as its content, and the box of each text by its index."""
        self.call("Page.setDocumentContent", frameId=self.frame, html=page)
        measured = self.call("Runtime.evaluate", expression=MEASURE, returnByValue=True)["result"]["value"]
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, optimizeForSpeed=True,
                         clip={"x": 0, "y": 0, "width": WIDTH, "height": measured["height"], "scale": 1})
        return Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB"), measured["boxes"]

    def close(self) -> None:
        os.close(self._commands)  # Chromium quits at the end of its pipe
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        os.close(self._replies)
        shutil.rmtree(self.profile, ignore_errors=True)


@cache
def browser() -> Browser:
    """This process's Chromium, started on its first page and closed when the process ends (a pool worker
    too: multiprocessing runs its finalizers there, where atexit does not run)."""
    if (executable := chromium()) is None:
        raise BenchsmithError(INSTALL)
    started = Browser(executable)
    util.Finalize(started, started.close, exitpriority=10)
    return started


# A forked worker must start its own: two processes on one pipe take each other's replies and wait forever.
os.register_at_fork(after_in_child=browser.cache_clear)


class Html:
    """A page being written: `text` writes one text element and keeps it with its role and what places it."""

    def __init__(self) -> None:
        self.texts: list[dict] = []

    def text(self, text: str, role: str, tag: str = "span", css: str = "", **about) -> str:
        self.texts.append({"role": role, "text": text} | about)
        return f'<{tag} class="{css}" data-t="{len(self.texts) - 1}">{html.escape(text)}</{tag}>'

    def button(self, label: str) -> str:
        return self.text(label, "button", "button")


def _style(rng: random.Random) -> str:
    accent, size = rng.choice(ACCENTS), rng.randint(15, 17)
    dark = rng.random() < 0.5  # the header in the accent colour with white letters, or white with dark ones
    head = (f"background:{accent};color:#fff" if dark
            else f"background:#fff;color:{accent};border-bottom:2px solid {accent}")
    return f"""* {{box-sizing:border-box;margin:0;padding:0}}
body {{width:{WIDTH}px;font-family:'{rng.choice(FONTS)}',sans-serif;font-size:{size}px;color:#1b1b1b;background:#fff}}
[data-t] {{white-space:nowrap}}
header {{display:flex;align-items:center;justify-content:space-between;padding:16px 28px;{head}}}
header h1 {{font-size:1.7em}}
nav {{display:flex;gap:{rng.randint(24, 40)}px;padding:12px 28px;background:#f1f2f4;border-bottom:1px solid #d8d8d8}}
main {{display:flex;gap:32px;padding:22px 28px 28px}}
aside {{display:flex;flex-direction:column;align-self:flex-start;gap:16px;width:160px;padding:12px;
  background:#f6f6f6;border-radius:6px}}
section {{flex:1;display:flex;flex-direction:column;gap:18px;align-items:flex-start}}
h2 {{font-size:1.3em}}
button {{font:inherit;padding:6px 14px;border-radius:5px;border:none;background:{accent};color:#fff}}
header button {{background:#fff;color:{accent};border:1px solid {accent}}}
.grid {{display:grid;grid-template-columns:repeat({rng.randint(3, 4)},1fr);gap:18px;align-self:stretch}}
.card {{border:1px solid #d4d4d4;border-radius:6px;padding:14px;display:flex;flex-direction:column;gap:9px;
  align-items:flex-start}}
.price {{font-weight:bold;font-size:1.1em}}
.query {{border:1px solid #999;border-radius:18px;padding:7px 18px;width:420px}}
.result {{display:flex;flex-direction:column;gap:4px}}
.result h3 {{font-size:1.15em;color:{accent}}}
.site {{color:#2a6b2a}}
.fields {{display:grid;grid-template-columns:auto auto;gap:10px 36px}}
.field-name {{color:#555}}
table {{border-collapse:collapse}} th, td {{padding:8px 18px;border-bottom:1px solid #c8c8c8;text-align:left}}
th {{background:#eceef2}}"""


def _header(page: Html, data: dict, layout: str, rng: random.Random, right: str = "") -> tuple[str, str]:
    """The site name and the top menu (and what `right` puts at the header's right); the site name."""
    site = rng.choice(data["sites"][layout])
    items = rng.sample(data["tabs"] if layout == "results" else data["menu"], rng.randint(5, 7))
    menu = "".join(page.text(item, "menu", index=i) for i, item in enumerate(items))
    return f"<header>{page.text(site, 'title', 'h1')}{right}</header><nav>{menu}</nav>", site


def _side(page: Html, data: dict, rng: random.Random) -> str:
    items = rng.sample(data["side"], rng.randint(5, 7))
    return "<aside>" + "".join(page.text(item, "side_menu", index=i) for i, item in enumerate(items)) + "</aside>"


def _shop(page: Html, data: dict, rng: random.Random) -> tuple[str, dict]:
    header, site = _header(page, data, "shop", rng, page.button(rng.choice(data["buttons"]["header"])))
    names = rng.sample(page_data()["products"], rng.randint(6, 8))
    cents = rng.sample(range(199, 9999, 25), len(names))  # every price and rating once: no ties to compare
    ratings = rng.sample(range(25, 51), len(names))
    label = rng.choice(data["buttons"]["shop"])
    products = [{"name": n, "price": f"${c // 100}.{c % 100:02d}", "rating": f"{r // 10}.{r % 10}"}
                for n, c, r in zip(names, cents, ratings)]
    cards = "".join(f'<div class="card">{page.text(p["name"], "product", "b", item=i)}'
                    f'{page.text(p["price"], "price", "span", "price", item=i)}'
                    f'{page.text("Rating " + p["rating"], "rating", item=i)}{page.button(label)}</div>'
                    for i, p in enumerate(products))
    return (f'{header}<main><section><div class="grid">{cards}</div></section></main>',
            {"title": site, "products": products})


def _results(page: Html, data: dict, rng: random.Random) -> tuple[str, dict]:
    query = rng.choice(rng.choice(page_data()["themes"])["categories"])
    box = f'<div class="query">{page.text(query, "query")}</div>{page.button("Search")}'
    header, site = _header(page, data, "results", rng, box)
    titles = [title.format(q=query) for title in rng.sample(data["titles"], rng.randint(5, 6))]
    results = [{"title": t, "site": s, "snippet": rng.choice(data["snippets"]).format(q=query)}
               for t, s in zip(titles, rng.sample(data["domains"], len(titles)))]
    listed = "".join(f'<div class="result">{page.text(r["title"], "result", "h3", rank=i)}'
                     f'{page.text(r["site"], "site", "span", "site", rank=i)}'
                     f'{page.text(r["snippet"], "snippet", rank=i)}</div>' for i, r in enumerate(results))
    return f"{header}<main><section>{listed}</section></main>", {"title": site, "query": query, "results": results}


def _profile(page: Html, data: dict, rng: random.Random) -> tuple[str, dict]:
    header, site = _header(page, data, "profile", rng, page.button(rng.choice(data["buttons"]["header"])))
    words = page_data()
    counts = rng.sample(range(12, 4000), 4)  # no ties to compare
    fields = {"Location": rng.choice(words["cities"]), "Joined": f"{rng.choice(['Mar', 'Jun', 'Sep', 'Dec'])} "
              f"{rng.randint(2012, 2025)}", **dict(zip(("Followers", "Following", "Posts", "Likes"), map(str, counts)))}
    name = rng.choice(words["customers"])
    rows = "".join(page.text(k, "field_name", "span", "field-name", field=k) + page.text(v, "field_value", field=k)
                   for k, v in fields.items())
    buttons = "".join(page.button(b) for b in rng.sample(data["buttons"]["profile"], 2))
    body = (f'{_side(page, data, rng)}<section>{page.text(name, "name", "h2")}<div class="fields">{rows}</div>'
            f'<div style="display:flex;gap:14px">{buttons}</div></section>')
    return f"{header}<main>{body}</main>", {"title": site, "name": name, "fields": fields}


def _report(page: Html, data: dict, rng: random.Random) -> tuple[str, dict]:
    header, site = _header(page, data, "report", rng, page.button(rng.choice(data["buttons"]["report"])))
    theme = rng.choice(page_data()["themes"])
    series = rng.sample(theme["series"], rng.randint(2, 3))
    rows = value_rows(rng, theme, rng.sample(theme["categories"], rng.randint(4, 6)), series)
    columns = ["Name", *series]
    head = "".join(page.text(c, "column_heading", "th", column=i) for i, c in enumerate(columns))
    body = "".join("<tr>" + "".join(page.text(cell, "cell", "td", row=r, column=c) for c, cell in enumerate(row))
                   + "</tr>" for r, row in enumerate(rows))
    section = f'{page.text(theme["title"], "heading", "h2")}<table><tr>{head}</tr>{body}</table>'
    return (f"{header}<main>{_side(page, data, rng)}<section>{section}</section></main>",
            {"title": site, "heading": theme["title"], "columns": columns, "rows": rows})


LAYOUTS = {"shop": _shop, "results": _results, "profile": _profile, "report": _report}
CAPTIONS = {  # each names what the page lists: the ingest richness check asks for a few nouns
    "shop": lambda t: f"A web shop page from {t['title']} listing {', '.join(p['name'] for p in t['products'])}, each "
                      "with a price, a rating and a button.",
    "results": lambda t: f"A search results page on {t['title']} for \"{t['query']}\" with the results "
                         f"{', '.join(r['title'] for r in t['results'])}.",
    "profile": lambda t: f"A profile page of {t['name']} on {t['title']} showing {', '.join(t['fields'])}, with a "
                         f"menu of {', '.join(t['side_menu'])}.",
    "report": lambda t: f"A web page on {t['title']} with a table titled \"{t['heading']}\" with columns "
                        f"{', '.join(t['columns'])} and rows for {', '.join(row[0] for row in t['rows'])}.",
}


def render(rng: random.Random) -> tuple[Image.Image, dict]:
    """A web page and its manifest row (captions, OCR lines with pixel boxes, truth)."""
    layout = rng.choice(sorted(LAYOUTS))
    page, data = Html(), page_data()["web"]
    style = _style(rng)
    body, truth = LAYOUTS[layout](page, data, rng)
    image, boxes = browser().draw(f"<!doctype html><html><head><meta charset=utf-8><style>{style}</style></head>"
                                  f"<body>{body}</body></html>")
    texts = [t | {"box_px": box} for t, box in zip(page.texts, boxes)]
    truth = {"kind": "web", "layout": layout} | truth | {
        "menu": [t["text"] for t in texts if t["role"] == "menu"],
        "side_menu": [t["text"] for t in texts if t["role"] == "side_menu"],
        "buttons": list(dict.fromkeys(t["text"] for t in texts if t["role"] == "button"))}
    return image, row_of(CAPTIONS[layout](truth), texts, truth)


render.missing = missing  # make_pages asks before it starts: `--kind web` fails, `mix` goes on without it
