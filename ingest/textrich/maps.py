"""Maps drawn with Pillow from the places, routes and regions they keep: regions as filled polygons with
their names, places as legend symbols with their names beside them, numbered routes as coloured lines
through their stops, and a legend beside the map (each symbol's kind of place, each route's colour),
often with a north arrow and a scale bar. North is up.

Every text is an OCR line with the box Pillow drew it in. A place's name goes at the first of eight spots
around its marker where it covers no other text, marker or route line, and a region's name as near its
middle as it fits inside it; a route never passes over a place it does not stop at, and no two routes
share a stretch. A layout that cannot keep to this is drawn again from the same random stream, so a seed
always gives the same map and every kept text and marker is in plain view.
"""

from __future__ import annotations

import math
import random
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw

from ingest.textrich import font, page_data, row_of

MAP_W, PANEL_W, HEIGHT = 500, 180, 480
INK, REGION_INK = (30, 30, 30), (70, 80, 100)
FILLS = ((233, 240, 214), (246, 232, 206), (222, 234, 244), (240, 224, 232), (232, 228, 246), (226, 242, 236))
ROUTE_COLOURS = {"red": (214, 39, 40), "blue": (31, 100, 200), "green": (30, 150, 60), "orange": (245, 140, 0),
                 "purple": (140, 60, 170), "brown": (140, 90, 40)}
SHAPES = ("circle", "square", "triangle", "diamond")
R, GAP = 7, 3  # a marker's half size; the space kept around texts and markers
ATTEMPTS = 30
# where a place's name may go, nearest first: beside, above or below its marker, then at a corner
AROUND = ((1, 0, "lm"), (-1, 0, "rm"), (0, -1, "md"), (0, 1, "ma"), (1, -1, "ld"), (-1, -1, "rd"), (1, 1, "la"),
          (-1, 1, "ra"))


@lru_cache(maxsize=4096)
def extent(text: str, size: int, anchor: str) -> tuple[int, int, int, int]:
    """The box of text drawn at (0, 0) from `anchor`: measured once, then moved to where it is tried."""
    return font(size).getbbox(text, anchor=anchor)


def _regions(rng: random.Random) -> list[list[tuple[int, int]]]:
    """The map cut into 2x2, 3x2 or 2x3 quadrilaterals by a grid whose inner corners are jittered."""
    cols, rows = rng.choice(((2, 2), (3, 2), (2, 3)))

    def corner(i: int, j: int) -> tuple[int, int]:
        x, y = MAP_W * i / cols, HEIGHT * j / rows
        x += rng.uniform(-0.2, 0.2) * MAP_W / cols if 0 < i < cols else 0
        y += rng.uniform(-0.2, 0.2) * HEIGHT / rows if 0 < j < rows else 0
        return round(x), round(y)

    grid = {(i, j): corner(i, j) for j in range(rows + 1) for i in range(cols + 1)}
    return [[grid[i, j], grid[i + 1, j], grid[i + 1, j + 1], grid[i, j + 1]] for j in range(rows) for i in range(cols)]


def _inside(mask: np.ndarray, box, region: int | None = None) -> bool:
    """Whether box lies on the map within one region (`region`, numbered from 1, when given)."""
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    if x1 < 0 or y1 < 0 or x2 > MAP_W or y2 > HEIGHT:
        return False
    block = mask[y1:y2, x1:x2]
    return bool((block == (region or block[0, 0])).all())


def _spots(rng: random.Random, mask: np.ndarray, n: int) -> list[tuple[int, int]] | None:
    """n marker centres apart from each other, each marker well inside one region."""
    spots: list[tuple[int, int]] = []
    for _ in range(400):
        x, y = rng.randint(40, MAP_W - 40), rng.randint(30, HEIGHT - 30)
        clear = (x - R - 6, y - R - 6, x + R + 7, y + R + 7)
        if all(math.dist((x, y), s) >= 75 for s in spots) and _inside(mask, clear):
            spots.append((x, y))
            if len(spots) == n:
                return spots
    return None


def _off_segment(p, a, b) -> float:
    """The distance from point p to the straight line from a to b."""
    (px, py), (ax, ay), (bx, by) = p, a, b
    t = max(0.0, min(1.0, ((px - ax) * (bx - ax) + (py - ay) * (by - ay)) / ((bx - ax) ** 2 + (by - ay) ** 2)))
    return math.dist(p, (ax + t * (bx - ax), ay + t * (by - ay)))


def _angle(at, a, b) -> float:
    """The angle in degrees between the lines from `at` to a and from `at` to b."""
    turn = math.atan2(a[1] - at[1], a[0] - at[0]) - math.atan2(b[1] - at[1], b[0] - at[0])
    return abs(math.degrees((turn + math.pi) % (2 * math.pi) - math.pi))


def _routes(rng: random.Random, spots, n_routes: int) -> list[list[int]] | None:
    """n_routes routes of 3 or 4 stops (indices into spots), each leg to one of the three nearest places;
    a leg passes over no other place and meets every other leg at one of its ends at 25 degrees or more."""
    legs: list[tuple[int, int]] = []

    def fits(a: int, b: int) -> bool:
        return (all(_off_segment(s, spots[a], spots[b]) >= R + 10 for k, s in enumerate(spots) if k not in (a, b))
                and all(_angle(spots[m], spots[({a, b} - {m}).pop()], spots[({c, d} - {m}).pop()]) >= 25
                        for c, d in legs for m in {a, b} & {c, d} if {a, b} != {c, d})
                and not any({a, b} == {c, d} for c, d in legs))

    routes = []
    for _ in range(n_routes):
        for _try in range(20):
            stops, length = [rng.randrange(len(spots))], rng.randint(3, 4)
            while len(stops) < length:
                here = spots[stops[-1]]
                near = sorted((k for k in range(len(spots)) if k not in stops), key=lambda k: math.dist(here, spots[k]))
                free = [k for k in near[:3] if fits(stops[-1], k)]
                if not free:
                    break
                stops.append(rng.choice(free))
                legs.append((stops[-2], stops[-1]))
            if len(stops) == length:
                break
            del legs[len(legs) - len(stops) + 1:]
        else:
            return None
        routes.append(stops)
    return routes


def _crosses(leg, box) -> bool:
    """Whether the straight line leg ((x1, y1), (x2, y2)) passes through box (Liang-Barsky clipping)."""
    (x1, y1), (x2, y2) = leg
    t0, t1 = 0.0, 1.0
    for p, q in ((x1 - x2, x1 - box[0]), (x2 - x1, box[2] - x1), (y1 - y2, y1 - box[1]), (y2 - y1, box[3] - y1)):
        if p == 0 and q < 0:
            return False
        if p < 0:
            t0 = max(t0, q / p)
        elif p > 0:
            t1 = min(t1, q / p)
    return t0 <= t1


def _to_box(point, box) -> float:
    """The distance from a point to the nearest point of a box."""
    return math.hypot(max(box[0] - point[0], 0, point[0] - box[2]), max(box[1] - point[1], 0, point[1] - box[3]))


def _overlap(a, b) -> bool:
    return min(a[2], b[2]) + GAP > max(a[0], b[0]) and min(a[3], b[3]) + GAP > max(a[1], b[1])


def _marker(draw: ImageDraw.ImageDraw, shape: str, x: float, y: float, fill=INK) -> None:
    corners = {"square": [(x - R, y - R), (x + R, y - R), (x + R, y + R), (x - R, y + R)],
               "triangle": [(x, y - R - 2), (x + R + 1, y + R), (x - R - 1, y + R)],
               "diamond": [(x, y - R - 2), (x + R + 2, y), (x, y + R + 2), (x - R - 2, y)]}.get(shape)
    if corners:
        draw.polygon(corners, fill=fill, outline=(255, 255, 255), width=2)
    else:
        draw.ellipse((x - R, y - R, x + R, y + R), fill=fill, outline=(255, 255, 255), width=2)


def _layout(rng: random.Random) -> dict | None:
    """One try at a map: where its regions, places, routes and names go; None when a name finds no room."""
    data = page_data()["maps"]
    polygons = _regions(rng)
    mask_image = Image.new("L", (MAP_W, HEIGHT), 0)
    for k, polygon in enumerate(polygons):
        ImageDraw.Draw(mask_image).polygon(polygon, fill=k + 1)
    mask = np.asarray(mask_image)
    spots = _spots(rng, mask, rng.randint(8, 10))
    routes = spots and _routes(rng, spots, 4)
    if not routes:
        return None
    names = rng.sample(data["places"], len(spots))
    legs = [(spots[a], spots[b]) for stops in routes for a, b in zip(stops, stops[1:])]
    taken: list[list[float]] = []  # the texts' boxes
    labels = []

    def place_text(text: str, size: int, tries, region: int | None = None, own=None) -> list | None:
        """The first try (xy, anchor) at which text fits: on the map (inside `region` when given), apart
        from the texts placed before it and the route lines, and far enough from every marker but its
        `own` that no one takes it for another place's name."""
        for (x, y), anchor in tries:
            left, top, right, bottom = extent(text, size, anchor)
            box = [x + left, y + top, x + right, y + bottom]
            padded = (box[0] - GAP, box[1] - GAP, box[2] + GAP, box[3] + GAP)
            if (not any(_overlap(box, t) for t in taken) and not any(_crosses(leg, padded) for leg in legs)
                    and all(_to_box(s, box) >= R + 12 for s in spots if s != own)
                    and (_inside(mask, padded, region) if region else  # the costliest check last
                         padded[0] >= 0 and padded[1] >= 0 and padded[2] <= MAP_W and padded[3] <= HEIGHT)):
                taken.append(box)
                return [(x, y), anchor, box]
        return None

    size = rng.randint(14, 16)
    for name, (x, y) in zip(names, spots):
        spot = place_text(name, size, [((x + dx * d, y + dy * d), anchor) for d in (R + 3, R + 11)
                                       for dx, dy, anchor in AROUND], own=(x, y))
        if spot is None:
            return None
        labels.append(("place", name, size, *spot))
    region_names = rng.sample(data["regions"], len(polygons))
    for k, (name, polygon) in enumerate(zip(region_names, polygons)):
        cx, cy = (sum(c) / 4 for c in zip(*polygon))
        xs, ys = [p[0] for p in polygon], [p[1] for p in polygon]
        grid = [(x, y) for x in range(min(xs), max(xs), 12) for y in range(min(ys), max(ys), 12)]
        spot = place_text(name, size + 3, [(xy, "mm") for xy in sorted(grid, key=lambda p: math.dist(p, (cx, cy)))],
                          region=k + 1)
        if spot is None:
            return None
        labels.append(("region", name, size + 3, *spot))
    region_of = {name: region_names[mask[y, x] - 1] for name, (x, y) in zip(names, spots)}
    return {"polygons": polygons, "region_names": region_names, "spots": spots, "names": names, "routes": routes,
            "labels": labels, "region_of": region_of, "size": size}


def render(rng: random.Random) -> tuple[Image.Image, dict]:
    """A map and its manifest row (captions, OCR lines with pixel boxes, truth)."""
    layout = next(filter(None, (_layout(rng) for _attempt in range(ATTEMPTS))), None)
    if layout is None:
        raise RuntimeError("no map laid out without covered names")  # never met with the shipped names
    data = page_data()["maps"]
    title = rng.choice(data["titles"])
    meanings = rng.sample(data["kinds"], len(SHAPES))
    shapes = rng.sample(SHAPES, len(SHAPES))
    kinds = [*range(len(SHAPES)), *(rng.randrange(len(SHAPES)) for _ in layout["spots"][len(SHAPES):])]
    rng.shuffle(kinds)
    colour_names = rng.sample(list(ROUTE_COLOURS), len(layout["routes"]))
    route_names = [f"Route {n}" for n in rng.sample(range(1, 60), len(layout["routes"]))]

    image = Image.new("RGB", (MAP_W + PANEL_W, HEIGHT), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    for polygon, fill in zip(layout["polygons"], rng.sample(FILLS, len(layout["polygons"]))):
        draw.polygon(polygon, fill=fill, outline=(150, 150, 150), width=2)
    spots = layout["spots"]
    for stops, colour in zip(layout["routes"], colour_names):
        draw.line([spots[k] for k in stops], fill=ROUTE_COLOURS[colour], width=5, joint="curve")
    for (x, y), kind in zip(spots, kinds):
        _marker(draw, shapes[kind], x, y)
    texts = []
    for role, name, size, xy, anchor, box in layout["labels"]:
        draw.text(xy, name, fill=INK if role == "place" else REGION_INK, font=font(size), anchor=anchor)
        texts.append({"role": role, "text": name, "box_px": box, role: name})

    # the legend, beside the map
    draw.line((MAP_W, 0, MAP_W, HEIGHT), fill=(120, 120, 120), width=2)
    x0, size = MAP_W + 14, layout["size"]

    def put(xy, text: str, role: str, size: int = size, anchor: str = "lm", **about) -> None:
        draw.text(xy, text, fill=INK, font=font(size), anchor=anchor)
        box = [a + b for a, b in zip(extent(text, size, anchor), xy * 2)]
        texts.append({"role": role, "text": text, "box_px": box} | about)

    put((x0, 28), title, "title", size + 7)
    y, legend = 74, []
    for shape, meaning in zip(shapes, meanings):
        _marker(draw, shape, x0 + 8, y)
        put((x0 + 26, y), meaning, "legend", symbol=shape)
        legend.append({"symbol": shape, "meaning": meaning})
        y += size + 14
    for colour, name in zip(colour_names, route_names):
        draw.line((x0, y, x0 + 18, y), fill=ROUTE_COLOURS[colour], width=5)
        put((x0 + 26, y), name, "legend", symbol="line", colour=colour)
        legend.append({"symbol": "line", "colour": colour, "meaning": name})
        y += size + 14
    compass = rng.random() < 0.7
    if compass:
        ax, ay = x0 + 20, y + 44
        draw.polygon([(ax, ay - 22), (ax + 9, ay + 10), (ax, ay + 4), (ax - 9, ay + 10)], fill=INK)
        put((ax, ay - 28), "North", "compass", size - 1, anchor="md")
    scale = None
    if rng.random() < 0.7:
        km, length = rng.choice(((1, 60), (2, 80), (5, 100), (10, 90)))
        sx, sy = x0 + (60 if compass else 4), y + 40
        draw.rectangle((sx, sy, sx + length, sy + 5), outline=INK, width=1)
        draw.rectangle((sx, sy, sx + length // 2, sy + 5), fill=INK)
        put((sx + length / 2, sy + 10), f"{km} km", "scale", size - 1, anchor="ma")
        scale = {"text": f"{km} km", "px": length}

    places = [{"name": name, "kind": meanings[kind], "symbol": shapes[kind], "x": x, "y": y,
               "box_px": [x - R, y - R, x + R, y + R], "colour": "#%02x%02x%02x" % INK,
               "region": layout["region_of"][name]}
              for name, (x, y), kind in zip(layout["names"], spots, kinds)]
    routes = [{"name": name, "colour": colour, "rgb": list(ROUTE_COLOURS[colour]),
               "stops": [layout["names"][k] for k in stops]}
              for name, colour, stops in zip(route_names, colour_names, layout["routes"])]
    regions = [{"name": name, "polygon": [list(p) for p in polygon],
                "places": [p["name"] for p in places if p["region"] == name]}
               for name, polygon in zip(layout["region_names"], layout["polygons"])]
    truth = {"kind": "map", "title": title, "map_px": [MAP_W, HEIGHT], "places": places, "routes": routes,
             "regions": regions, "legend": legend, "compass": compass, "scale": scale}
    caption = (f"A map of {title} with {len(places)} places joined by {', '.join(route_names)}, "
               f"in the regions {', '.join(layout['region_names'])}.")
    return image, row_of(caption, texts, truth)
