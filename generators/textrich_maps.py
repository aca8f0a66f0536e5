"""Exact questions about rendered maps (`ingest.textrich.maps`) from the places, routes, regions and legend
they were drawn from: one template per dimension of the `maps` group, run by the text-rich generator.

Every option comes from the same map, so the options alone say nothing: a legend meaning among the
others, a route among the other routes, a region among the other regions, a place among other places.
A place named in the question is never an option unless it is the key. A comparison of positions
(farthest north, nearest to a place) is asked only when the key leads the next option by `min_gap` of
the map's height or width, so the difference can be seen. North is up.
"""

from __future__ import annotations

import math
import random

from generators.programmatic import Draft, drafts_of

# the sign that turns a place's x or y into how far it lies in each direction
DIRECTIONS = {"north": (1, -1), "south": (1, 1), "east": (0, 1), "west": (0, -1)}
# a direction as a map without a north arrow lets a reader say it: on the page, not on the compass
ON_THE_PAGE = {"north": "up", "south": "down", "east": "right", "west": "left"}


def reading(truth: dict, _pools, _settings, rng: random.Random) -> list[Draft]:
    """What a legend symbol means, which route a line colour is, what kind of place a marker shows."""
    meanings = [e["meaning"] for e in truth["legend"] if e["symbol"] != "line"]
    routes = [e["meaning"] for e in truth["legend"] if e["symbol"] == "line"]
    asks = [(f"What does the {e['symbol']} symbol stand for on the map?", e["meaning"], meanings, {"ask": "symbol"})
            for e in truth["legend"] if e["symbol"] != "line"]
    asks += [(f"Which route is drawn as the {e['colour']} line on the map?", e["meaning"], routes, {"ask": "line"})
             for e in truth["legend"] if e["symbol"] == "line"]
    asks += [(f"What kind of place is {p['name']}, going by its symbol on the map?", p["kind"], meanings,
              {"ask": "kind"}) for p in truth["places"]]
    return drafts_of(rng, "map_reading", asks)


def routes(truth: dict, _pools, _settings, rng: random.Random) -> list[Draft]:
    """Which route runs directly between two places; which stop follows a place along a route."""
    names = [r["name"] for r in truth["routes"]]
    places = [p["name"] for p in truth["places"]]
    asks = []
    for route in truth["routes"]:
        stops = route["stops"] if rng.random() < 0.5 else route["stops"][::-1]
        for here, after in zip(stops, stops[1:]):
            a, b = rng.sample((here, after), 2)
            asks.append((f"Which route runs directly between {a} and {b}?", route["name"], names, {"ask": "connects"}))
            asks.append((f"{route['name']} starts at {stops[0]}. Which stop comes directly after {here}?", after,
                         [p for p in places if p not in (stops[0], here)], {"ask": "next stop"}))
    return drafts_of(rng, "map_routes", asks)


def spatial(truth: dict, _pools, settings, rng: random.Random) -> list[Draft]:
    """Which region a place lies in and which place lies in a region; which of four places lies farthest
    in a direction, or nearest to a fifth, where the lead is visible."""
    regions = [r["name"] for r in truth["regions"]]
    at = {p["name"]: (p["x"], p["y"]) for p in truth["places"]}
    asks = [(f"In which region of the map is {p['name']}?", p["region"], regions, {"ask": "region"})
            for p in truth["places"]]
    asks += [(f"Which of these places lies in {r['name']}?", name, [p for p in at if p not in r["places"]],
              {"ask": "in region"}) for r in truth["regions"] for name in r["places"]]
    drafts = drafts_of(rng, "map_spatial", asks)
    width, height = truth["map_px"]
    for _ in range(len(at)):
        direction = rng.choice(sorted(DIRECTIONS))
        axis, sign = DIRECTIONS[direction]
        four = rng.sample(sorted(at), 4)
        first, second = sorted((sign * at[n][axis] for n in four), reverse=True)[:2]
        if first - second >= max(settings.min_gap * (height if axis else width), 1):
            key = max(four, key=lambda n: sign * at[n][axis])
            said = direction if truth.get("compass") else ON_THE_PAGE[direction]
            drafts.append(Draft(f"Which of these places lies farthest {said} on the map?",
                                (key, *(n for n in four if n != key)), {"template": "map_spatial", "ask": "farthest"}))
        here, *four = rng.sample(sorted(at), 5)
        first, second = sorted(math.dist(at[n], at[here]) for n in four)[:2]
        if second - first >= max(settings.min_gap * width, 1):
            key = min(four, key=lambda n: math.dist(at[n], at[here]))
            drafts.append(Draft(f"Which of these places is nearest to {here} in a straight line?",
                                (key, *(n for n in four if n != key)), {"template": "map_spatial", "ask": "nearest"}))
    return drafts


TEMPLATES = {"map_reading": reading, "map_routes": routes, "map_spatial": spatial}
