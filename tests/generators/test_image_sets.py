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
from generators.image_sets import ImageSetSettings, generate, members, one_image_answers
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

    def colours(self, k: int, kind: str) -> list[str]:
        return [o["attributes"]["colour"] for o in self.rows[k - 1]["objects"] if o["label"] == kind]

    def counterpart(self, shape: str, i: int, j: int) -> str:
        """The name in image j of image i's `shape`: the same name, or else (it changed colour) the one shape
        of its kind in image j whose name image i does not show."""
        if shape in self.shapes(j):
            return shape
        kind = shape.split()[-1]
        found, = [n for n in self.shapes(j) if n.split()[-1] == kind and n not in self.shapes(i)]
        return found

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


def _agree(values: list) -> bool:
    return all(v == values[0] for v in values)


def _odd_state(m: Members, k: int, part) -> bool:
    """Whether image k shows some shape (named alike in every image) otherwise than all the others, which
    agree on it; `part` reads the compared part of the shape's row."""
    rest = [s for s in m.images() if s != k]
    names = set.intersection(*(set(m.shapes(s)) for s in m.images()))
    return any(_agree([part(m.shapes(s)[n]) for s in rest]) and part(m.shapes(k)[n]) != part(m.shapes(rest[0])[n])
               for n in names)


def _odd_colour(m: Members, k: int) -> bool:
    """Image k shows a shape in a colour no other image shows it in: a colour and kind only image k shows,
    where every other image shows that kind in a colour image k lacks."""
    rest = [s for s in m.images() if s != k]
    elsewhere = set().union(*(m.shapes(s) for s in rest))
    in_all_others = set.intersection(*(set(m.shapes(s)) for s in rest))
    return any(n.split()[-1] == o.split()[-1] for n in set(m.shapes(k)) - elsewhere
               for o in in_all_others - set(m.shapes(k)))


def _count_off(m: Members, k: int, sign: int) -> bool:
    return all((len(m.shapes(k)) - len(m.shapes(s))) * sign > 0 for s in m.images() if s != k)


ODD_IMAGE = {
    "Which image shows a shape in another place than all the other images do?":
        lambda m, k: _odd_state(m, k, lambda o: tuple(o["box"]))
        and not _odd_state(m, k, lambda o: o["attributes"]["size"]),
    "Which image shows a shape in another colour than all the other images do?": _odd_colour,
    "Which image shows a shape at another size than all the other images do?":
        lambda m, k: _odd_state(m, k, lambda o: o["attributes"]["size"]),
    "Which image shows fewer shapes than each of the other images?": lambda m, k: _count_off(m, k, -1),
    "Which image shows more shapes than each of the other images?": lambda m, k: _count_off(m, k, 1),
    "Which image shows a sign that reads otherwise than in all the other images?":
        lambda m, k: _agree([m.signs(s) for s in m.images() if s != k]) and m.signs(k) != m.signs(
            next(s for s in m.images() if s != k)),
}


def right_options(text: str, options: list[str], m: Members) -> set[str]:
    """The options that are true of the member images, worked out from the question's words alone."""
    def ask(pattern: str) -> re.Match | None:
        return re.fullmatch(pattern, text)

    if found := ask(r"What changed between image (\d) and image (\d)\?"):
        said = change_between(m, int(found[1]), int(found[2]))
        return {o for o in options if o.endswith(said)}
    if found := ask(r"Which shape changed colour between image (\d) and image (\d)\?"):
        i, j = int(found[1]), int(found[2])  # the options name a kind of shape that each image shows once
        return {o for o in options if m.colours(i, o.removeprefix("the ")) != m.colours(j, o.removeprefix("the "))}
    if found := ask(r"Which shape (moved|changed size) between image (\d) and image (\d)\?"):
        i, j = int(found[2]), int(found[3])
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
    if text in ODD_IMAGE:
        return set(m.only(lambda k: ODD_IMAGE[text](m, k)))
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
    if found := (ask(r"In which part of image (\d) is the shape (?:that is )?(in the (.+) of|inside the frame in) "
                     r"image (\d)\?")
                 or ask(r"In image (\d), what colour is the shape that is (in the (.+) of) image (\d)\?")):
        j, i = int(found[1]), int(found[4])
        if found[2] == "inside the frame in":  # the frame drawn in image i, as its own manifest row says
            frame, = m.rows[i - 1]["truth"]["frames"]
            there, = [n for n, o in m.shapes(i).items() if inside(o["box"], frame)]
        else:
            there, = [n for n, o in m.shapes(i).items() if place(o["box"]) == found[3]]
        shape = m.shapes(j)[m.counterpart(there, i, j)]
        said = shape["attributes"]["colour"] if text.startswith("In image") else place(shape["box"])
        return {o for o in options if o == said}
    raise AssertionError(f"a question no check knows: {text}")


@pytest.fixture(scope="module")
def asked(tmp_path_factory) -> list[tuple[Members, object]]:
    folder = tmp_path_factory.mktemp("sets")
    made = [row for kind, n in (("pairs", 30), ("sets", 50), ("views", 20), ("marked", 20))
            for row in rows(make_sets(folder / kind, n, kind, seed=4))]
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


def kept(asked):
    return [(m, q) for m, q in asked if not q.meta.get("dropped")]


def test_each_dimension_asks_in_several_ways(asked):
    templates = Counter((q.dimension_id, q.meta["template"]) for _m, q in kept(asked))
    assert {t for (d, t) in templates if d == 27} == {"what_changed", "which_shape", "sign_text"}
    assert {t for (d, t) in templates if d == 28} >= {"odd_image", "odd_shape", "count", "relation"}
    assert {t for (d, t) in templates if d == 29} == {"where", "colour", "framed"}
    assert all(n >= 100 for n in Counter(q.dimension_id for _m, q in kept(asked)).values())


def test_a_marked_pair_is_asked_only_where_the_shape_its_frame_is_around_went(asked):
    marked = [q for m, q in kept(asked) if m.truth["kind"] == "marked"]
    assert len(marked) >= 8 and {q.meta["template"] for q in marked} == {"framed"}


def test_which_shape_also_compares_two_changed_copies(asked):
    """Between two copies changed each its own way, more than one thing differs: still one shape moved
    (changed colour, ...), and the question asks which."""
    between_copies = [q for m, q in kept(asked) if q.meta["template"] == "which_shape"
                      and m.truth["base"] not in {int(k) for k in re.findall(r"image (\d)", q.text)}]
    assert len(between_copies) >= 20


def test_what_changed_names_each_kind_of_change_as_often_as_key_as_chance_allows(asked):
    """A kind of change ('moved', 'got bigger') is the key about a quarter of the times it is an option."""
    kinds = ("moved", "got bigger", "got smaller")
    shown, keyed = Counter(), Counter()
    for _m, q in kept(asked):
        if q.meta["template"] == "what_changed":
            for o in q.options:
                kind = next(k for k in kinds if o.endswith(k))
                shown[kind] += 1
                keyed[kind] += o == q.options[q.answer]
    assert all(0.1 <= keyed[k] / shown[k] <= 0.45 for k in kinds), (keyed, shown)


# -- one image alone ---------------------------------------------------------------------------------

def shape(i, colour, kind, box, size="medium"):
    return {"id": i, "colour": colour, "shape": kind, "size": size, "box": list(box)}


def scene(*shapes, signs=()):
    return {"objects": list(shapes), "signs": [list(s) for s in signs]}


STAR, CIRCLE, SQUARE = (shape(0, "red", "star", (0.05, 0.05, 0.15, 0.18)),
                        shape(1, "blue", "circle", (0.45, 0.4, 0.55, 0.55)),
                        shape(2, "green", "square", (0.8, 0.75, 0.9, 0.9)))
HEXAGON = shape(3, "yellow", "hexagon", (0.75, 0.1, 0.85, 0.25))


@pytest.mark.parametrize("text, options, image", [
    # distractors no image shows: either image alone shows only the key
    ("Which shape is in both images?", ["red star", "pink diamond", "black triangle", "orange circle"], 1),
    # distractors both images show: the image without the key shows all three
    ("Which shape is in image 1 but not in image 2?", ["green square", "red star", "blue circle", "yellow hexagon"], 2),
    # no decoy written anywhere: the later image shows the key alone
    ('The sign that reads "harbour" in image 1: what does it read in image 2?',
     ["garden", "castle", "bridge", "mill"], 2),
    # changes the later image shows did not happen: the star is still there and still red, so is the circle
    ("What changed between image 1 and image 2?", ["A yellow hexagon appeared", "The red star disappeared",
                                                   "The red star turned pink", "The blue circle disappeared"], 2),
])
def test_one_member_image_answers_what_the_issue_found_it_answers(text, options, image):
    pair = members({"scenes": [scene(STAR, CIRCLE, SQUARE, signs=[["harbour"]]),
                               scene(STAR, CIRCLE, HEXAGON, signs=[["garden"]])]})
    found = one_image_answers(text, options, options[0], pair)
    assert found and found[0] == image, found


def test_decoys_each_image_shows_leave_both_images_needed():
    pair = members({"scenes": [scene(STAR, CIRCLE, SQUARE), scene(STAR, CIRCLE, HEXAGON)]})
    assert one_image_answers("Which shape is in both images?", ["red star", "green square", "yellow hexagon",
                                                                "pink diamond"], "red star", pair) is None
    assert one_image_answers("Which shape is in image 1 but not in image 2?",
                             ["green square", "red star", "pink diamond", "black circle"], "green square", pair) is None


def test_no_question_one_member_image_answers_is_kept_and_a_dropped_one_says_which(asked):
    dropped = 0
    for m, q in asked:
        found = one_image_answers(q.text, q.options, q.options[q.answer], members(m.truth))
        if q.meta.get("drop_rule") == "one_image_answers":
            dropped += 1
            assert found and q.meta["dropped"].startswith(f"image {found[0]} alone answers it"), q.meta
        elif not q.meta.get("dropped"):
            assert found is None, (q.text, q.options, found)
    assert dropped


# a key that names no fact a question could state: an image, a part of the picture, a colour
FACTLESS = re.compile(r"image \d|(top|middle|bottom) (left|centre|right)|centre|"
                      r"red|green|blue|yellow|orange|purple|black|pink")


def test_no_kept_key_is_stated_in_the_text_of_another_question_of_its_set(asked):
    by_set = {}
    for m, q in asked:
        by_set.setdefault(q.item_id, []).append(q)
    for questions in by_set.values():
        texts = [q.text for q in questions]
        for q in questions:
            key = q.options[q.answer]
            if not q.meta.get("dropped") and not FACTLESS.fullmatch(key):
                assert not [t for t in texts if t != q.text and re.search(rf"\b{re.escape(key)}\b", t)], (key, q.text)


def test_no_other_shape_comes_near_the_part_a_question_names(asked):
    """'The shape in the top left of image 1': no second shape's centre within the grid margin of it."""
    margin = ImageSetSettings().grid_margin
    for m, q in kept(asked):
        if found := re.search(r"in the (.+) of image (\d)\?", q.text):
            row, column = next((r, c) for r, line in enumerate(GRID) for c, part in enumerate(line) if part == found[1])
            near = [o for o in m.rows[int(found[2]) - 1]["objects"]
                    if column / 3 - margin < (o["box"][0] + o["box"][2]) / 2 < (column + 1) / 3 + margin
                    and row / 3 - margin < (o["box"][1] + o["box"][3]) / 2 < (row + 1) / 3 + margin]
            assert len(near) == 1, (q.text, near)


def test_a_shape_just_across_the_line_keeps_a_part_from_being_named():
    """A pink star alone in the top left, but a blue square touching it whose centre lies 7 px below the
    line: "the shape in the top left of image 1" would be either."""
    first = scene(shape(0, "pink", "star", (0.1, 0.15, 0.2, 0.28)),
                  shape(1, "blue", "square", (0.2, 0.27, 0.3, 0.4267)),  # centre 0.348 of the height, 167 px
                  shape(2, "green", "circle", (0.8, 0.8, 0.9, 0.92)),
                  shape(3, "black", "diamond", (0.45, 0.8, 0.55, 0.92)))
    moved = [o | {"box": box} for o, box in zip(first["objects"], [(0.8, 0.4, 0.9, 0.55), (0.45, 0.05, 0.55, 0.18),
                                                                    (0.1, 0.8, 0.2, 0.92), (0.1, 0.4, 0.2, 0.55)])]
    truth = {"kind": "views", "base": 1, "changes": [], "scenes": [first, scene(*moved)]}
    item = ImageSet.of([Image(id=n, path=n, width=640, height=480) for n in ("a.png", "b.png")],
                       annotations={"truth": truth})
    asked_here = generate(item, registry().get("visual_correspondence"), ImageSetSettings())
    assert asked_here and not [q.text for q in asked_here if "top left of image 1" in q.text]


def test_no_text_puts_a_before_a_vowel():
    """'the only one with a orange triangle': four images, one with an orange triangle added."""
    base = scene(STAR, CIRCLE, SQUARE, signs=[["harbour"]])
    copies = [scene(STAR, CIRCLE, SQUARE, shape(4, "orange", "triangle", (0.4, 0.8, 0.5, 0.95)), signs=[["harbour"]]),
              scene(STAR, CIRCLE, signs=[["harbour"]]), scene(STAR, CIRCLE, SQUARE, signs=[["garden"]])]
    truth = {"kind": "sets", "base": 1, "changes": [], "scenes": [base, *copies]}
    item = ImageSet.of([Image(id=n, path=n, width=640, height=480) for n in "abcd"], annotations={"truth": truth})
    texts = [t for key in DIMENSIONS for q in generate(item, registry().get(key), ImageSetSettings())
             for t in (q.text, *q.options)]
    assert texts and not [t for t in texts if re.search(r"\b[Aa] [aeiou]", t)]


def test_sets_in_questions_out_through_the_installed_command(tmp_path):
    kinds = ("pairs", "sets", "views", "marked")
    for kind in kinds:
        assert run(tmp_path, "scenes", "make", "--sets", "4", "--kind", kind, "--out", kind).returncode == 0
    ingested = run(tmp_path, "ingest", *(f"{kind}/manifest.jsonl" for kind in kinds))
    assert ingested.returncode == 0 and ingested.stdout.count("4 image sets added") == 4, ingested.stdout
    made = run(tmp_path, "generate", "-g", "image_sets", COLUMNS="200")
    assert made.returncode == 0, made.stderr
    assert re.search(r"jobs\s+│\s+48 ", made.stdout), made.stdout  # 16 sets x 3 multi-image dimensions
    assert re.search(r"dropped: one_image_answers\s+│\s+[1-9]", made.stdout), made.stdout
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
        reasons = [v.reason for v in store.get_verdicts(stage="quality") if v.rule == "one_image_answers"]
    assert {q.dimension_id for q in kept} == {27, 28, 29}
    assert reasons and all(re.match(r"image \d alone answers it: it rules out ", r) for r in reasons), reasons[:3]
    for q in kept:
        m = Members(sets[items[q.item_id]], by_path)
        assert right_options(q.text, q.options, m) == {q.options[q.answer]}, q.text
        assert one_image_answers(q.text, q.options, q.options[q.answer], members(m.truth)) is None, q.text
    again = run(tmp_path, "generate", "-g", "image_sets")
    assert re.search(r"jobs\s+│\s+0 ", again.stdout)
