"""Scene sets: every member image shows exactly the change its set records, and `benchsmith ingest` makes
the sets image sets of the stored images."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest
from scipy.stats import chisquare

from benchsmith.paths import truetype_font
from benchsmith.store import Store
from ingest.scene_sets import CHANGES, make_sets, plan_set
from ingest.scenes import scene_words
from tests.generators.test_cli import run


def rows(manifest) -> list[dict]:
    return [json.loads(line) for line in manifest.read_text().splitlines()]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("sets")
    return [row for kind, n in (("pairs", 15), ("sets", 15), ("views", 10), ("marked", 8))
            for row in rows(make_sets(folder / kind, n, kind, seed=2))]


def shapes_of(row: dict) -> dict[str, dict]:
    """A member image's shapes by colour and shape, from its own manifest row."""
    return {f"{o['attributes']['colour']} {o['label']}": o for o in row["objects"]}


def region(box) -> tuple[int, int]:
    return min(int((box[1] + box[3]) / 2 * 3), 2), min(int((box[0] + box[2]) / 2 * 3), 2)


def test_each_image_differs_from_the_unchanged_one_by_exactly_its_recorded_change(made):
    by_path = {r["path"]: r for r in made if "path" in r}
    sets = [r for r in made if "images" in r]
    assert {len(s["images"]) for s in sets} == {2, 3, 4}
    for s in sets:
        members = [by_path[name] for name in s["images"]]
        truth = s["truth"]
        base = members[truth["base"] - 1]
        assert len(truth["changes"]) == len(members) - 1
        positions = sorted(c["image"] for c in truth["changes"])
        assert positions == [k for k in range(1, len(members) + 1) if k != truth["base"]]
        for change in truth["changes"]:
            changed = members[change["image"] - 1]
            was, now = shapes_of(base), shapes_of(changed)
            kind, before, after = change["kind"], change.get("before"), change.get("after")
            if kind == "view":
                assert_a_new_view(base, changed)
                continue
            if kind == "text":
                assert before != after
                assert " ".join(before) in " ".join(base["truth"]["words"])
                assert " ".join(after) in " ".join(changed["truth"]["words"])
                assert was == now
                continue
            old = before and f"{before['colour']} {before['shape']}"
            new = after and f"{after['colour']} {after['shape']}"
            same = set(was) & set(now) - {old, new}
            assert all(was[n] == now[n] for n in same), "only the changed shape differs"
            assert base["truth"]["words"] == changed["truth"]["words"]
            if kind == "added":
                assert new in now and new not in was and set(was) <= set(now)
            elif kind == "removed":
                assert old in was and old not in now and set(now) <= set(was)
            elif kind == "recoloured":
                assert old in was and new in now and old not in now and new not in was
                assert was[old]["box"] == now[new]["box"]
            elif kind == "resized":
                sizes = was[old]["attributes"]["size"], now[old]["attributes"]["size"]
                assert sizes == (before["size"], after["size"]) and sizes[0] != sizes[1]
            else:
                assert kind == "moved" and set(was) == set(now)
                assert region(was[old]["box"]) != region(now[old]["box"])
    assert {c["kind"] for s in sets for c in s["truth"]["changes"]} == {"moved", "recoloured", "resized", "added",
                                                                        "removed", "text", "view"}


def assert_a_new_view(base: dict, view: dict) -> None:
    """Every shape of the scene is in another part of the picture in the view, the same size and kind, and
    the same colour unless its kind is alone in the scene; the signs stay."""
    was, now = shapes_of(base), shapes_of(view)
    assert len(was) == len(now) and base["truth"]["words"] == view["truth"]["words"]
    kinds = Counter(o["label"] for o in was.values())
    recoloured = 0
    for name, o in was.items():
        same = now.get(name) or next(n for k, n in now.items() if n["label"] == o["label"] and k not in was)
        assert kinds[o["label"]] == 1 or name in now, "a recoloured shape is told by its kind"
        assert same["attributes"]["size"] == o["attributes"]["size"] and region(same["box"]) != region(o["box"])
        recoloured += name not in now
    assert recoloured < len(was)


def test_a_marked_pair_frames_one_shape_of_a_scene_and_its_new_view(tmp_path):
    """The frame is drawn where image 1's row says, around one shape alone, and image 2 (a new view of
    image 1, or image 1 of it) has none."""
    from PIL import Image as Pil

    made = rows(make_sets(tmp_path, 12, "marked", seed=5))
    by_path = {r["path"]: r for r in made if "path" in r}
    for row in (r for r in made if "images" in r):
        first, second = (by_path[p] for p in row["images"])
        frame, = first["truth"]["frames"]
        assert "frames" not in second["truth"]
        x1, y1, x2, y2 = round(frame[0] * 640), round(frame[1] * 480), round(frame[2] * 640), round(frame[3] * 480)
        pixels = Pil.open(tmp_path / row["images"][0]).convert("RGB")
        edge = [pixels.getpixel((x, y)) for x in range(x1, x2 + 1, 7) for y in (y1, y2)]
        assert all(p == (0, 0, 0) for p in edge), "the frame is not drawn where the row says"
        unframed = Pil.open(tmp_path / row["images"][1]).convert("RGB")
        assert any(unframed.getpixel((x, y1)) != (0, 0, 0) for x in range(x1, x2 + 1, 7))
        within = [o for o in first["objects"] if frame[0] <= o["box"][0] and frame[1] <= o["box"][1]
                  and o["box"][2] <= frame[2] and o["box"][3] <= frame[3]]
        touching = [o for o in first["objects"] if o["box"][0] < frame[2] and frame[0] < o["box"][2]
                    and o["box"][1] < frame[3] and frame[1] < o["box"][3]]
        assert len(within) == 1 and touching == within
        scene, view = (first, second) if row["truth"]["base"] == 1 else (second, first)
        assert_a_new_view(scene, view)


def test_every_kind_of_change_is_as_likely_as_any_other():
    """A text-only reader would learn which changes happen more often than others."""
    font, words = truetype_font(), scene_words()
    kinds = Counter(c["kind"] for i in range(300) for c in plan_set(5, i, "sets", font, words)[1]["changes"])
    assert set(kinds) == set(CHANGES) and chisquare([kinds[k] for k in CHANGES]).pvalue > 0.05, kinds


def test_members_are_distinct_images_and_the_same_seed_draws_the_same_sets(tmp_path, made):
    digest = lambda m: [hashlib.sha256((m.parent / r["path"]).read_bytes()).hexdigest()  # noqa: E731
                        for r in rows(m) if "path" in r]
    a, b = make_sets(tmp_path / "a", 3, "sets", seed=2), make_sets(tmp_path / "b", 3, "sets", seed=2)
    assert digest(a) == digest(b) and a.read_text() == b.read_text()
    assert len(set(digest(a))) == len(digest(a))


def test_ingest_makes_each_set_of_its_stored_images_in_order_and_a_rerun_adds_nothing(tmp_path):
    assert run(tmp_path, "scenes", "make", "--sets", "3", "--kind", "sets", "--out", "sets").returncode == 0
    first = run(tmp_path, "ingest", "sets/manifest.jsonl")
    assert first.returncode == 0 and "3 image sets added" in first.stdout, first.stdout + first.stderr
    again = run(tmp_path, "ingest", "sets/manifest.jsonl")
    assert again.returncode == 0 and "image sets added" not in again.stdout and "refused" not in again.stdout
    listed = [r for r in rows(tmp_path / "sets" / "manifest.jsonl") if "images" in r]
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        stored = {s.original_name: s for s in store.get_items(kind="image_set")}
        images = {i.id: i for i in store.get_items(kind="image")}
    assert len(stored) == 3
    for number, row in enumerate(listed, len(rows(tmp_path / "sets" / "manifest.jsonl")) - 2):
        image_set = stored[f"manifest.jsonl:{number}"]
        ids = [hashlib.sha256((tmp_path / "sets" / name).read_bytes()).hexdigest() for name in row["images"]]
        assert image_set.images == ids and image_set.paths == [images[i].path for i in ids]
        assert image_set.annotations["truth"] == row["truth"]


def test_a_set_with_an_image_outside_the_manifest_folder_or_not_stored_is_refused_with_the_reason(tmp_path):
    assert run(tmp_path, "scenes", "make", "--sets", "1", "--kind", "pairs", "--out", "pairs").returncode == 0
    manifest = tmp_path / "pairs" / "manifest.jsonl"
    first = next(r["path"] for r in rows(manifest) if "path" in r)
    (tmp_path / "outside.png").write_bytes((tmp_path / "pairs" / first).read_bytes())
    with manifest.open("a") as handle:
        handle.write(json.dumps({"images": [first, "../outside.png"]}) + "\n")
        handle.write(json.dumps({"images": [first, "not_listed.png"]}) + "\n")
    done = run(tmp_path, "ingest", str(manifest), COLUMNS="200")
    assert done.returncode == 0, done.stderr
    assert "1 image sets added" in done.stdout and "2 refused (1 escapes_root, 1 set_image_missing)" in done.stdout
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        reasons = {v.rule: v.reason for v in store.get_verdicts(stage="ingest")}
    assert "image ../outside.png leaves the manifest's folder" in reasons["escapes_root"]
    assert "image not_listed.png is not a stored image" in reasons["set_image_missing"]
