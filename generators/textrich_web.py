"""Exact questions about web pages (`ingest.textrich.web`) from what each page lists and where the browser
drew each text; the `textrich` generator asks them in the `web` group of dimensions.

Distractors come from the same page (other products' prices, other results, other menu items), except
for the site name, a button's label and a profile's fields, whose distractors are the same kind of text
on other pages of the same layout (`Pools`). Where one element sits relative to another is read off the
text boxes and asked only when the answer is clear: the neighbour lines up with the named element and
sits at least `CLEAR_PX` from it, nearer than any other by as much.
"""

from __future__ import annotations

import random
from decimal import Decimal

from generators.programmatic import Draft, drafts_of
from generators.textrich_pools import Pools, noun

CLEAR_PX = 8
# the gap is from the named element's edge to the other's: box indices (x1, y1, x2, y2)
DIRECTIONS = {"right": (2, 0), "left": (0, 2), "below": (3, 1), "above": (1, 3)}
PLACES = {"right": "directly to the right of", "left": "directly to the left of", "below": "directly below",
          "above": "directly above"}
GROUPS = {"menu": ("item of the top menu", ("right", "left")),
          "side_menu": ("item of the side menu", ("below", "above")),
          "result": ("search result", ("below", "above")),
          "product": ("product", ("right", "left", "below", "above"))}


def _texts(truth: dict, role: str) -> list[dict]:
    return [t for t in truth["texts"] if t["role"] == role]


# -- Web Page Reading -----------------------------------------------------------------------------

def reading(truth, pools: Pools, _settings, rng) -> list[Draft]:
    layout, shown = noun(truth), [t["text"] for t in truth["texts"]]
    pooled = [("What is the name of the website at the top of the page?", truth["title"], f"title:{layout}")]
    pooled += [("Which of these is written on a button on the page?", b, f"button:{layout}") for b in truth["buttons"]]
    pooled += [(f"What does the profile show for {name}?", value, f"field:{layout}:{name}")
               for name, value in truth.get("fields", {}).items()]
    asks = [(text, key, pools.others(role, shown), {"pooled": role.split(":")[0]}) for text, key, role in pooled]
    local = []  # (question, key, the same kind of value elsewhere on the page)
    products, results = truth.get("products", ()), truth.get("results", ())
    for name, about in (("price", "What is the price of {} on the page?"),
                        ("rating", "What rating does {} have on the page?")):
        local += [(about.format(p["name"]), p[name], [q[name] for q in products]) for p in products]
    local += [(f"Which website does the search result {r['title']} come from?", r["site"], [q["site"] for q in results])
              for r in results]
    for c, heading in enumerate(truth.get("columns", ())[1:], 1):
        local += [(f"What does the table on the page show under {heading} for {row[0]}?", row[c],
                   [other[c] for other in truth["rows"]]) for row in truth["rows"]]
    return drafts_of(rng, "web_reading", asks + [(text, key, others, {"pooled": ""}) for text, key, others in local])


# -- Web Page Comparison --------------------------------------------------------------------------

def _extremes(values: dict[str, Decimal], words: tuple[str, str], question: str, rng: random.Random,
              drawn: dict[str, str] | None = None) -> list[Draft]:
    """Questions for the entry with the highest (words[0]) and lowest (words[1]) value among four (each four
    once), asked only where no other of the four ties with it. `drawn`: each entry's value as the page
    writes it, the texts the answer is worked out from (`reads`)."""
    names, drafts, asked = sorted(values), [], set()
    for _ in range(len(names) - 3):
        four = rng.sample(names, 4)
        if frozenset(four) in asked:
            continue
        asked.add(frozenset(four))
        for word, best in zip(words, (max, min)):
            key = best(four, key=values.__getitem__)
            if sum(values[n] == values[key] for n in four) == 1:
                drafts.append(Draft(question.format(word), (key, *(n for n in four if n != key)),
                                    {"template": "web_comparison", "extreme": word}
                                    | ({"reads": [drawn[n] for n in four]} if drawn else {})))
    return drafts


def comparison(truth, _pools, _settings, rng) -> list[Draft]:
    products = truth.get("products", ())
    drafts = _extremes({p["name"]: Decimal(p["price"].lstrip("$")) for p in products}, ("most expensive", "cheapest"),
                       "Which of these products is the {} on the page?", rng, {p["name"]: p["price"] for p in products})
    drafts += _extremes({p["name"]: Decimal(p["rating"]) for p in products}, ("highest", "lowest"),
                        "Which of these products has the {} rating on the page?", rng,
                        {p["name"]: f"Rating {p['rating']}" for p in products})
    drafts += _extremes({r["title"]: Decimal(-rank) for rank, r in enumerate(truth.get("results", ()))},
                        ("highest", "lowest"), "Which of these search results is ranked {} on the page?", rng)
    counts = {k: v for k, v in truth.get("fields", {}).items() if v.isdigit()}
    drafts += _extremes({k: Decimal(v) for k, v in counts.items()}, ("highest", "lowest"),
                        "Which of these counts is the {} on the profile?", rng, counts)
    for c, heading in enumerate(truth.get("columns", ())[1:], 1):
        drafts += _extremes({row[0]: Decimal(row[c]) for row in truth["rows"]}, ("highest", "lowest"),
                            f"Which of these has the {{}} {heading} in the table on the page?", rng,
                            {row[0]: row[c] for row in truth["rows"]})
    return drafts


# -- Web Page Layout ------------------------------------------------------------------------------

def neighbour(boxes: dict[str, list[float]], name: str, direction: str) -> str | None:
    """The element next to `name` in `direction`: the nearest that lines up with it (overlapping it across
    the direction by half the smaller extent) with a gap of at least CLEAR_PX, and nearer than the next
    by CLEAR_PX; None when there is no such clear one."""
    here, (own, other) = boxes[name], DIRECTIONS[direction]
    across = (1, 3) if direction in ("right", "left") else (0, 2)
    sign = 1 if direction in ("right", "below") else -1
    gaps = []
    for candidate, box in boxes.items():
        overlap = min(here[across[1]], box[across[1]]) - max(here[across[0]], box[across[0]])
        smaller = min(here[across[1]] - here[across[0]], box[across[1]] - box[across[0]])
        gap = sign * (box[other] - here[own])
        if candidate != name and overlap >= smaller / 2 and gap >= CLEAR_PX:
            gaps.append((gap, candidate))
    gaps.sort()
    if not gaps or (len(gaps) > 1 and gaps[1][0] - gaps[0][0] < CLEAR_PX):
        return None
    return gaps[0][1]


def layout(truth, _pools, _settings, rng) -> list[Draft]:
    drafts = []
    for role, (what, directions) in GROUPS.items():
        boxes = {t["text"]: t["box_px"] for t in _texts(truth, role)}
        if len(boxes) < 5 or len(boxes) != len(_texts(truth, role)):  # four options, none the named one
            continue
        drafts += drafts_of(rng, "web_layout", [(f"Which {what} is {PLACES[direction]} {name} on the page?", key,
                                                 [n for n in boxes if n != name], {"direction": direction})
                                                for name in boxes for direction in directions
                                                if (key := neighbour(boxes, name, direction))])
    return drafts


TEMPLATES = {"web_reading": reading, "web_comparison": comparison, "web_layout": layout}
