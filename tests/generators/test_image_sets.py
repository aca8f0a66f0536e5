"""Questions over scene sets: every key worked out again from the question's words, the member images'
manifest rows and the set's recorded changes (never from the question's meta), and the whole path through
the installed command."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from benchsmith.dimensions import registry
from benchsmith.records import Image, ImageSet
from benchsmith.store import Store
from generators.image_sets import ImageSetSettings, generate
from ingest.scene_sets import make_sets
from tests.generators.test_cli import run

DIMENSIONS = ("image_differences", "image_comparison", "visual_correspondence")
GRID = (("top left", "top centre", "top right"), ("middle left", "centre", "middle right"),
        ("bottom left", "bottom centre", "bottom right"))
SIZES = ("small", "medium", "large")


def rows(manifest) -> list[dict]:
    return [json.loads(line) for line in manifest.read_text().splitlines()]


class Members:
    """What the member images of one set show, read from their own manifest rows."""

    def __init__(self, set_row: dict, by_path: dict[str, dict]) -> None:
        self.rows = [by_path[name] for name in set_row["images"]]
        self.truth = set_row["truth"]

    def shapes(self, k: int) -> dict[str, dict]:
        return {f"{o['attributes']['colour']} {o['label']}": o for o in self.rows[k - 1]["objects"]}

    def signs(self, k: int) -> list[str]:
        return [" ".join(s["words"]) for s in self.rows[k - 1]["truth"]["signs"]]

    def state(self, k: int, name: str):
        shape = self.shapes(k).get(name)
        return shape and (shape["attributes"]["size"], tuple(shape["box"]))

    def images(self) -> range:
        return range(1, len(self.rows) + 1)

    def only(self, holds) -> list[str]:
        return [f"image {k}" for k in self.images() if holds(k)]


def place(box) -> str:
    return GRID[min(int((box[1] + box[3]) / 2 * 3), 2)][min(int((box[0] + box[2]) / 2 * 3), 2)]


def inside(box, frame) -> bool:
    return frame[0] <= box[0] and frame[1] <= box[1] and box[2] <= frame[2] and box[3] <= frame[3]


def change_between(m: Members, i: int, j: int) -> str:
    """The recorded change from image i to image j, one of them the unchanged image, in the words of an
    option; a change recorded from j to i is told backwards."""
    base = m.truth["base"]
    assert base in (i, j), "asked about two changed images"
    change = next(c for c in m.truth["changes"] if c["image"] in (i, j))
    kind, before, after = change["kind"], change.get("before"), change.get("after")
    if change["image"] == i:  # recorded from j (the unchanged image) to i
        kind = {"added": "removed", "removed": "added"}.get(kind, kind)
        before, after = after, before
    if kind == "text":
        return f"now reads \"{' '.join(after)}\""
    if kind == "added":
        return f"{after['colour']} {after['shape']} appeared"
    if kind == "recoloured":
        return f"{before['colour']} {before['shape']} turned {after['colour']}"
    if kind == "resized":
        bigger = SIZES.index(after["size"]) > SIZES.index(before["size"])
        return f"{before['colour']} {before['shape']} got {'bigger' if bigger else 'smaller'}"
    return f"{before['colour']} {before['shape']} {'moved' if kind == 'moved' else 'disappeared'}"


def right_options(text: str, options: list[str], m: Members) -> set[str]:
    """The options that are true of the member images, worked out from the question's words alone."""
    def ask(pattern: str) -> re.Match | None:
        return re.fullmatch(pattern, text)

    if found := ask(r"What changed between image (\d) and image (\d)\?"):
        said = change_between(m, int(found[1]), int(found[2]))
        return {o for o in options if o.endswith(said)}
    if found := ask(r"Which shape (moved|changed colour|changed size) between image (\d) and image (\d)\?"):
        i, j = int(found[2]), int(found[3])
        if found[1] == "changed colour":
            return {o for o in options if o in m.shapes(i) and o not in m.shapes(j)}
        both = [o for o in options if m.state(i, o) and m.state(j, o)]
        if found[1] == "changed size":
            return {o for o in both if m.state(i, o)[0] != m.state(j, o)[0]}
        return {o for o in both if m.state(i, o)[0] == m.state(j, o)[0] and m.state(i, o)[1] != m.state(j, o)[1]}
    if found := ask(r"Which shape is in image (\d) but not in image (\d)\?"):
        return {o for o in options if o in m.shapes(int(found[1])) and o not in m.shapes(int(found[2]))}
    if found := ask(r'The sign that reads "(.+)" in image (\d): what does it read in image (\d)\?'):
        at = m.signs(int(found[2])).index(found[1])
        return {o for o in options if o == m.signs(int(found[3]))[at]}
    if found := ask(r"Which shape is in (every image|both images)\?"):
        return {o for o in options if all(o in m.shapes(k) for k in m.images())}
    if found := ask(r"Which shape looks different in image (\d) than in all the other images\?"):
        t = int(found[1])
        return {o for o in options if all(m.state(t, o) != m.state(k, o) for k in m.images() if k != t)}
    if found := ask(r"Which image is the only one (without the|with a) (.+)\?"):
        return set(m.only(lambda k: (found[2] in m.shapes(k)) == (found[1] == "with a")))
    if found := ask(r"In which image is the (.+) (somewhere else|a different size) than in the other images\?"):
        index = 1 if found[2] == "somewhere else" else 0
        differs = lambda k: all(m.state(k, found[1])[index] != m.state(s, found[1])[index]  # noqa: E731
                                for s in m.images() if s != k)
        return set(m.only(differs))
    if found := ask(r"In which image is the (\w+) that is (\w+) in the other images a different colour\?"):
        return set(m.only(lambda k: f"{found[2]} {found[1]}" not in m.shapes(k)))
    if found := ask(r'In which image does the sign that reads "(.+)" in the other images read something else\?'):
        return set(m.only(lambda k: found[1] not in m.signs(k)))
    if found := ask(r"Which image shows the (most|fewest) (.+)\?"):
        def count(k):
            return sum(found[2] in ("shapes", f"{o['attributes']['colour']} shapes", f"{o['label']}s")
                       for o in m.rows[k - 1]["objects"])
        best = (max if found[1] == "most" else min)(count(k) for k in m.images())
        return set(m.only(lambda k: count(k) == best))
    if found := ask(r"In which image is the (.+) (to the left of|to the right of|above|below) the (.+)\?"):
        def holds(k):
            a, b = m.shapes(k)[found[1]]["box"], m.shapes(k)[found[3]]["box"]
            return {"to the left of": a[2] <= b[0], "to the right of": b[2] <= a[0], "above": a[3] <= b[1],
                    "below": b[3] <= a[1]}[found[2]]
        return set(m.only(holds))
    if found := ask(r"The (\w+) in the (.+) of image (\d) is (\w+)\. What colour is that \w+ in image (\d)\?"):
        box = m.shapes(int(found[3]))[f"{found[4]} {found[1]}"]["box"]
        assert place(box) == found[2]
        return {o for o in options if m.shapes(int(found[5])).get(f"{o} {found[1]}", {}).get("box") == box}
    if found := (ask(r"Which shape in image (\d) is the one in the (.+) of image (\d)\?")
                 or ask(r"Which shape in image (\d) is the one (inside the frame) in image (\d)\?")):
        j, i = int(found[1]), int(found[3])
        if found[2] == "inside the frame":  # the frame drawn in image i, as its own manifest row says
            frame, = m.rows[i - 1]["truth"]["frames"]
            there, = [n for n, o in m.shapes(i).items() if inside(o["box"], frame)]
        else:
            there, = [n for n, o in m.shapes(i).items() if place(o["box"]) == found[2]]
        for c in m.truth["changes"]:  # a shape recoloured in image i or j is named otherwise in the other
            if c["kind"] == "recoloured" and c["image"] in (i, j):
                was, now = (f"{c[k]['colour']} {c[k]['shape']}" for k in ("before", "after"))
                there = {(was, j): now, (now, i): was}.get((there, c["image"]), there)
        return {o for o in options if o == there}
    raise AssertionError(f"a question no check knows: {text}")


@pytest.fixture(scope="module")
def asked(tmp_path_factory) -> list[tuple[Members, object]]:
    folder = tmp_path_factory.mktemp("sets")
    made = (rows(make_sets(folder / "pairs", 30, "pairs", seed=4)) + rows(make_sets(folder / "sets", 50, "sets", seed=4))
            + rows(make_sets(folder / "marked", 20, "marked", seed=4)))
    by_path = {r["path"]: r for r in made if "path" in r}
    out = []
    for row in (r for r in made if "images" in r):
        members = [Image(id=name, path=name, width=640, height=480) for name in row["images"]]
        item = ImageSet.of(members, annotations={"truth": row["truth"]})
        for key in DIMENSIONS:
            out += [(Members(row, by_path), q) for q in generate(item, registry().get(key), ImageSetSettings())]
    return out


def test_every_key_is_the_one_option_true_of_the_images(asked):
    for m, q in asked:
        assert right_options(q.text, q.options, m) == {q.options[q.answer]}, (q.text, q.options, q.answer, m.truth)


def test_each_dimension_asks_in_several_ways(asked):
    templates = Counter((q.dimension_id, q.meta["template"]) for _m, q in asked)
    assert {t for (d, t) in templates if d == 27} == {"what_changed", "which_shape", "sign_text"}
    assert {t for (d, t) in templates if d == 28} == {"in_every_image", "odd_image", "odd_shape", "count", "relation"}
    assert {t for (d, t) in templates if d == 29} == {"which", "colour", "framed"}


def test_a_marked_pair_is_asked_only_which_shape_its_frame_is_around(asked):
    marked = [q for m, q in asked if m.truth["kind"] == "marked"]
    assert len(marked) >= 15 and {q.meta["template"] for q in marked} == {"framed"}


def test_which_shape_also_compares_two_changed_copies(asked):
    """Between two copies changed each its own way, more than one thing differs: still one shape moved
    (changed colour, ...), and the question asks which."""
    between_copies = [q for m, q in asked if q.meta["template"] == "which_shape"
                      and m.truth["base"] not in {int(k) for k in re.findall(r"image (\d)", q.text)}]
    assert len(between_copies) >= 20


def test_what_changed_names_each_kind_of_change_as_often_as_key_as_chance_allows(asked):
    """A kind of change ('moved', 'appeared') is the key about a quarter of the times it is an option."""
    kinds = ("moved", "turned", "got", "disappeared", "appeared")  # "appeared" after "disappeared"
    shown, keyed = Counter(), Counter()
    for _m, q in asked:
        if q.meta["template"] == "what_changed":
            for o in q.options:
                kind = next(k for k in kinds if k in o)
                shown[kind] += 1
                keyed[kind] += o == q.options[q.answer]
    assert all(0.1 <= keyed[k] / shown[k] <= 0.45 for k in kinds), (keyed, shown)


def test_sets_in_questions_out_through_the_installed_command(tmp_path):
    kinds = ("pairs", "sets", "marked")
    for kind in kinds:
        assert run(tmp_path, "scenes", "make", "--sets", "4", "--kind", kind, "--out", kind).returncode == 0
    ingested = run(tmp_path, "ingest", *(f"{kind}/manifest.jsonl" for kind in kinds))
    assert ingested.returncode == 0 and ingested.stdout.count("4 image sets added") == 3, ingested.stdout
    made = run(tmp_path, "generate", "-g", "image_sets")
    assert made.returncode == 0, made.stderr
    assert re.search(r"jobs\s+│\s+36 ", made.stdout), made.stdout  # 12 sets x 3 multi-image dimensions
    by_path, sets = {}, {}
    for kind in kinds:
        for row in rows(tmp_path / kind / "manifest.jsonl"):
            if "path" in row:
                by_path[row["path"]] = row
            else:
                sets[tuple(row["images"])] = row
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        names = {i.path: i.original_name for i in store.get_items(kind="image")}
        items = {s.id: tuple(names[p] for p in s.paths) for s in store.get_items(kind="image_set")}
        kept = store.get_questions(status="candidate")
    assert {q.dimension_id for q in kept} == {27, 28, 29}
    for q in kept:
        m = Members(sets[items[q.item_id]], by_path)
        assert right_options(q.text, q.options, m) == {q.options[q.answer]}, q.text
    again = run(tmp_path, "generate", "-g", "image_sets")
    assert re.search(r"jobs\s+│\s+0 ", again.stdout)
