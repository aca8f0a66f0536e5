"""The programmatic generator on the oracle scenes, scored by a checker that reads only the truth."""

from __future__ import annotations

import itertools
import json
import random
import re
from collections import Counter
from dataclasses import replace

import pytest
from scipy.stats import chi2, chisquare

from benchsmith.dimensions import registry
from benchsmith.records import Fact, Image, Provenance, normalise_text
from ingest.scenes import region_of
from generators.quality import QualitySettings, balance_answers, gate
from generators.programmatic import (RELATIONS, Ask, ProgrammaticSettings, Thing, generate, load_vocabulary, referent,
                                     relation, things_in)

SUPPLIED = Provenance(backend="supplied")
DIMENSIONS = ["instances_counting", "instance_location", "spatial_relation", "instance_attributes",
              "instance_identity", "text_understanding"]


def oracle_items(oracle_dir) -> list[tuple[Image, list[Fact], dict]]:
    """Images and facts built straight from the manifest, as the supplied extractor would."""
    out = []
    for line in (oracle_dir / "manifest.jsonl").read_text().splitlines():
        row = json.loads(line)
        image = Image(id=row["path"], path=row["path"], width=640, height=480)
        out.append((image, supplied_facts(image, row), row))
    return out


def supplied_facts(image: Image, row: dict) -> list[Fact]:
    facts = [Fact(item_id=image.id, kind="object", text=o["label"], box=tuple(o["box"]),
                  attributes=o["attributes"], provenance=SUPPLIED) for o in row["objects"]]
    for o in row["ocr"]:
        x1, y1, x2, y2 = o["box"]
        facts.append(Fact(item_id=image.id, kind="ocr", text=o["text"], quad=((x1, y1), (x2, y1), (x2, y2), (x1, y2)),
                          provenance=SUPPLIED))
    return facts


# -- an independent checker: it knows the manifest, not the generator --------------------------------

def _objects_matching(row: dict, target: dict) -> list[dict]:
    def fits(obj):
        return all((obj["label"] if k == "label" else obj["attributes"].get(k)) == v for k, v in target.items())
    return [o for o in row["objects"] if fits(o)]


def _only(row: dict, target: dict) -> dict | None:
    found = _objects_matching(row, target)
    return found[0] if len(found) == 1 else None


def _true_relation(a: dict, b: dict) -> set[str]:
    ax1, ay1, ax2, ay2 = a["box"]
    bx1, by1, bx2, by2 = b["box"]
    holds = set()
    if ax2 <= bx1:
        holds.add("to its left")
    if bx2 <= ax1:
        holds.add("to its right")
    if ay2 <= by1:
        holds.add("above it")
    if by2 <= ay1:
        holds.add("below it")
    return holds


def truly_correct(question, row) -> list[bool]:
    """For each option, whether it is true of the scene according to the manifest."""
    meta = question.meta
    options = question.options
    if meta["template"] == "count":
        n = len(_objects_matching(row, meta["filter"]))  # an empty filter counts every object
        return [option == str(n) for option in options]
    if meta["template"] == "location":
        obj = _only(row, meta["target"])
        return [obj is not None and option == region_of(obj["box"]) for option in options]
    if meta["template"] == "spatial":
        a, b = _only(row, meta["target"]), _only(row, meta["other"])
        holds = _true_relation(a, b) if a and b else set()
        return [len(holds) == 1 and option in holds for option in options]
    if meta["template"] == "attribute":
        obj = _only(row, meta["target"])
        return [obj is not None and obj["attributes"][meta["attribute"]] == option for option in options]
    if meta["template"] == "identity":
        seen = {f"{o['attributes']['colour']} {o['label']}" for o in row["objects"]}
        return [option in seen for option in options]
    if meta["template"] in ("count_choice", "location_choice", "spatial_choice"):
        return [_label_fits(question, row, _spoken_label(option, row)) for option in options]
    if meta["template"] == "text":
        words = {normalise_text(w) for w in row["truth"]["words"]}
        return [normalise_text(option) in words for option in options]
    raise AssertionError(f"unknown template {meta['template']}")


def _spoken_label(option: str, row: dict) -> str | None:
    """The scene's label an option names, singular or plural ('circle', 'circles', 'boxes'); None if absent."""
    for label in {o["label"] for o in row["objects"]} | set(load_vocabulary().labels):
        if option in (label, label + "s", label + "es"):
            return label
    return None


def _label_fits(question, row: dict, label: str | None) -> bool:
    """Whether the question's words hold of some object labelled `label` in the scene: there are exactly n of
    them, one of them is in the region, one of them is on that side of the object named."""
    meta, objects = question.meta, [o for o in row["objects"] if o["label"] == label]
    if meta["template"] == "count_choice":
        return len(objects) == meta["count"]
    if meta["template"] == "location_choice":
        return any(region_of(o["box"]) == meta["region"] for o in objects)
    anchor = _only(row, meta["other"])
    side = {"left": "to its left", "right": "to its right", "above": "above it", "below": "below it"}[meta["relation"]]
    return anchor is not None and any(side in _true_relation(o, anchor) for o in objects if o is not anchor)


@pytest.fixture(scope="module")
def oracle_questions(oracle_dir):
    settings = ProgrammaticSettings()
    items = oracle_items(oracle_dir)
    vocabulary = load_vocabulary().widened([f for _i, facts, _r in items for f in facts], settings)
    rows = {image.id: row for image, _f, row in items}
    questions = []
    for image, facts, _row in items:
        for key in DIMENSIONS:
            questions.extend(generate(image, facts, registry().get(key), vocabulary, settings, seed=1))
    kept, dropped = gate(questions, {}, QualitySettings())
    return balance_answers(kept), dropped, rows


def test_every_dimension_gets_questions(oracle_questions):
    kept, _dropped, _rows = oracle_questions
    per_template = Counter(q.meta["template"] for q in kept)
    assert set(per_template) == {"count", "location", "spatial", "attribute", "identity", "text", "count_choice",
                                 "location_choice", "spatial_choice"}
    assert all(n >= 15 for n in per_template.values()), per_template


def test_keyed_answers_agree_with_the_truth_and_distractors_are_false(oracle_questions):
    kept, _dropped, rows = oracle_questions
    agree = 0
    for question in kept:
        truth = truly_correct(question, rows[question.item_id])
        agree += truth[question.answer] and sum(truth) == 1
    share = agree / len(kept)
    print(f"\nagreement {share:.1%} over {len(kept)} questions")
    assert share == 1.0


def test_answer_letters_are_uniform_and_the_longest_option_is_rarely_right(oracle_questions):
    kept, _dropped, _rows = oracle_questions
    letters = Counter(q.answer for q in kept)
    p_value = chisquare([letters[i] for i in range(4)]).pvalue
    longest_correct = sum(
        1 for q in kept if sorted(len(o) for o in q.options)[-1] > sorted(len(o) for o in q.options)[-2]
        and len(q.options[q.answer]) == max(len(o) for o in q.options))
    share = longest_correct / len(kept)
    print(f"\nletters {dict(sorted(letters.items()))} chi2 p={p_value:.3f}; answer is the one longest option "
          f"in {share:.1%}")
    assert p_value > 0.05
    assert share <= 0.30


def test_generation_is_reproducible(oracle_dir):
    image, facts, _row = oracle_items(oracle_dir)[3]
    vocabulary = load_vocabulary()
    for key in DIMENSIONS:
        dimension = registry().get(key)
        first = generate(image, facts, dimension, vocabulary, ProgrammaticSettings(), seed=5)
        assert first == generate(image, facts, dimension, vocabulary, ProgrammaticSettings(), seed=5)


def test_count_distractors_are_drawn_uniformly_from_the_support_and_never_the_truth():
    rng = random.Random(0)
    vocabulary = load_vocabulary()  # not widened: the counts 0-5, evenly
    seen = Counter()
    for true in range(5):
        for _ in range(200):
            others = vocabulary.draw("count:label", str(true), ("0", "1", "2", "3", "4"), rng)
            assert str(true) not in others and len(set(others)) == 3
            seen.update(others)
    assert set(seen) == {"0", "1", "2", "3", "4"} and chisquare(list(seen.values())).pvalue > 0.01  # 0 is one too


def test_a_set_of_wrong_options_is_drawn_in_proportion_to_the_product_of_its_weights():
    weights = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 6.0}
    vocabulary = replace(load_vocabulary(), keys={"identity": weights})
    rng = random.Random(1)
    drawn = Counter(tuple(sorted(vocabulary.draw("identity", "z", weights, rng, n=2))) for _ in range(6000))
    pairs = sorted(itertools.combinations(weights, 2))
    expected = [weights[x] * weights[y] for x, y in pairs]
    assert chisquare([drawn[p] for p in pairs], [6000 * e / sum(expected) for e in expected]).pvalue > 0.01


TALLY = {"0": 400, "1": 300, "2": 60, "3": 12, "4": 6, "5": 3}  # keys as real photos settle them: mostly 0 and 1


def balanced(family: str, tally: dict[str, int]):
    """The vocabulary balanced over a collection whose questions of `family` have these keys, any of the
    family's keys a possible wrong option."""
    return load_vocabulary().balanced([(family, v, None) for v, n in tally.items() for _ in range(n)])


def _keyed_collection(vocabulary, n: int = 40000, seed: int = 2) -> list[tuple[str, ...]]:
    """Count questions over a collection with the keys of TALLY, as `counting` makes them: the key, three wrong
    counts drawn by the vocabulary, kept by its keep chance; the key first."""
    rng = random.Random(seed)
    keys = rng.choices(list(TALLY), list(TALLY.values()), k=n)
    return [(key, *vocabulary.draw("count:label", key, TALLY, rng)) for key in keys
            if rng.random() < vocabulary.keep_chance("count:label", key)]


def test_given_the_four_numbers_shown_each_is_the_key_equally_often():
    vocabulary = balanced("count:label", TALLY)
    kept = _keyed_collection(vocabulary)
    # more are kept than if every count were asked only as often as the rarest (6 x 3)
    assert len(kept) > 6 * 3 * 4 and {q[0] for q in kept} == set(TALLY)
    by_set: dict[frozenset, Counter] = {}
    for q in kept:
        by_set.setdefault(frozenset(q), Counter())[q[0]] += 1
    # within every set of four numbers shown often enough, the key is each of them about as often
    statistic, df = 0.0, 0
    for shown, keyed in by_set.items():
        if (total := sum(keyed.values())) >= 40:
            statistic += chisquare([keyed[v] for v in shown]).statistic
            df += 3
    assert df >= 9 and chi2.sf(statistic, df) > 0.01
    # so the key's rank among the four numbers is uniform too
    ranks = Counter(sorted(int(v) for v in q).index(int(q[0])) for q in kept)
    assert chisquare([ranks[r] for r in range(4)]).pvalue > 0.01, ranks


def _capped_key_rates(vocabulary, groups, cap: int, rounds: int = 100, seed: int = 4) -> tuple[Counter, Counter]:
    """How often each label is the key and is shown over `rounds` builds of a collection of `groups` (each a
    list of the labels its identity questions could have as key), asked as `generate` asks them: each kept
    with its key's keep chance, then at most `cap` of a group's kept questions, drawn at random."""
    rng = random.Random(seed)
    labels = sorted({label for group in groups for label in group})
    keyed, shown = Counter(), Counter()
    for _ in range(rounds):
        for group in groups:
            kept = [label for label in group if rng.random() < vocabulary.keep_chance("identity", label)]
            for label in rng.sample(kept, min(cap, len(kept))):
                keyed[label] += 1
                shown.update([label, *vocabulary.draw("identity", label, [v for v in labels if v not in group], rng)])
    return keyed, shown


def test_a_label_of_busy_photos_is_still_the_key_of_a_quarter_of_the_questions_showing_it():
    """'person' is in every busy photo, where the cap of 3 questions leaves most possible questions unasked;
    counted as if every question were asked, 'person' would be shown as a wrong option as if it were a key
    that often, and be the key of about a fifth of the questions that show it."""
    others = [f"thing{i}" for i in range(12)]
    busy = [["person", *others[i % 12:i % 12 + 6]] for i in range(30)]
    sparse = [[others[i % 12]] for i in range(60)] + [[others[i % 12], others[(i + 5) % 12]] for i in range(30)]
    groups = busy + sparse
    asks = [Ask("identity", label, tuple(v for v in ["person", *others] if v not in group), (str(index), "identity"))
            for index, group in enumerate(groups) for label in group]
    for cap, near_a_quarter in ((3, True), (None, False)):
        keyed, shown = _capped_key_rates(load_vocabulary().balanced(asks, cap), groups, cap=3)
        rate = keyed["person"] / shown["person"]
        assert abs(rate - 0.25) < 0.015 if near_a_quarter else abs(rate - 0.25) > 0.03, (cap, rate)
        assert all(abs(keyed[v] / shown[v] - 0.25) < 0.05 for v in others) or not near_a_quarter


def test_wrong_options_drawn_evenly_would_give_the_common_keys_away():
    """The check above can fail: with the same keep chances but the wrong counts drawn evenly, 0 and 1 are
    the key of most questions that show them."""
    even = balanced("count:label", TALLY)
    rng = random.Random(3)
    keyed, shown = Counter(), Counter()
    for key in rng.choices(list(TALLY), list(TALLY.values()), k=20000):
        if rng.random() < even.keep_chance("count:label", key):
            options = (key, *rng.sample([v for v in TALLY if v != key], 3))
            keyed[key] += 1
            shown.update(options)
    assert keyed["0"] / shown["0"] > 0.3 and keyed["5"] / shown["5"] < 0.15, (keyed, shown)


def test_the_support_is_every_key_the_collection_has_and_the_rarest_keys_are_always_kept():
    vocabulary = balanced("count:label", {"0": 40, "1": 100, "2": 50, "3": 30, "4": 5})
    assert vocabulary.support("count:label") == ("0", "1", "2", "3", "4")
    assert vocabulary.keep_chance("count:label", "4") == 1.0
    assert 0 < vocabulary.keep_chance("count:label", "1") < vocabulary.keep_chance("count:label", "0") < 1
    # the closed form for a pool of every key: proportional to e3 of the other keys' tallies
    e3 = {v: sum(a * b * c for a, b, c in itertools.combinations(
        [n for u, n in vocabulary.keys["count:label"].items() if u != v], 3)) for v in "01234"}
    assert vocabulary.keep_chance("count:label", "1") == pytest.approx(e3["1"] / max(e3.values()), rel=1e-3)
    assert vocabulary.keep_chance("count:label", "6") == 0.0
    assert load_vocabulary().support("count:label") == ("0", "1", "2", "3", "4", "5")  # not widened: the fallback
    # four relations always shown together: each is kept as often as the rarest
    relations = balanced("spatial", {"left": 40, "right": 40, "above": 10, "below": 10})
    assert relations.keep_chance("spatial", "left") == pytest.approx(0.25, rel=1e-3)
    assert relations.keep_chance("spatial", "above") == 1.0


def test_a_count_outside_the_support_is_dropped_with_its_reason():
    vocabulary = replace(load_vocabulary(), keys={"count:all": {"1": 9, "2": 9, "3": 9, "4": 9},
                                                  "count:label": {"0": 9, "1": 9, "2": 9, "3": 9},
                                                  "count:colour": {"0": 9, "1": 9, "2": 9, "3": 9}})
    image = Image(id="img", path="img.png", width=640, height=480)
    facts = [Fact(item_id="img", kind="object", text="star", box=(0.1 * i + 0.02, 0.1, 0.1 * i + 0.07, 0.2),
                  attributes={"colour": "red"}, provenance=SUPPLIED) for i in range(6)]
    questions = generate(image, facts, registry().get("instances_counting"), vocabulary,
                         ProgrammaticSettings(per_dimension=10), seed=0)
    by_filter = {json.dumps(q.meta["filter"]): q for q in questions if q.meta["template"] == "count"}
    for name in ('{}', '{"label": "star"}', '{"colour": "red"}'):  # six of each: no support holds 6
        assert "count 6 is outside the counts asked about" in by_filter[name].meta["dropped"]
    assert all("dropped" not in q.meta and q.options[0] == "0" for f, q in by_filter.items() if "6" not in q.options[:1]
               and f not in ('{}', '{"label": "star"}', '{"colour": "red"}'))


def test_every_count_is_the_key_about_a_quarter_of_the_times_it_is_shown(oracle_questions):
    kept, _dropped, _rows = oracle_questions
    shown, keyed = Counter(), Counter()
    for question in (q for q in kept if q.meta["template"] == "count"):
        family = next(iter(question.meta["filter"]), "all")
        shown.update((family, o) for o in question.options)
        keyed[(family, question.options[question.answer])] += 1
    assert keyed[("label", "0")] and shown[("label", "0")] > keyed[("label", "0")]  # 0 is a key and a distractor
    frequent = [k for k in shown if shown[k] >= 20]
    assert len(frequent) >= 4  # exact counts only: few scenes settle 3 or more
    # each value's key count against a binomial with p = 1/4 over its showings, pooled into one test
    statistic = sum((keyed[v] - shown[v] / 4) ** 2 / (shown[v] * 3 / 16) for v in frequent)
    assert chi2.sf(statistic, len(frequent)) > 0.01, {v: (keyed[v], shown[v]) for v in frequent}


def test_left_right_and_above_below_are_asked_about_equally_often(oracle_questions):
    kept, _dropped, _rows = oracle_questions
    keys = Counter(q.options[q.answer] for q in kept if q.meta["template"] == "spatial")
    assert sum(keys.values()) >= 30 and chisquare([keys[r] for r in RELATIONS.values()]).pvalue > 0.05, keys


def test_a_referent_uses_the_fewest_attributes_that_make_it_unique():
    red_circle = Thing("circle", (0, 0, 0.1, 0.1), {"colour": "red", "size": "small", "shape": "circle"})
    blue_circle = Thing("circle", (0.5, 0, 0.6, 0.1), {"colour": "blue", "size": "small", "shape": "circle"})
    big_blue = Thing("circle", (0.5, 0.5, 0.9, 0.9), {"colour": "blue", "size": "large", "shape": "circle"})
    things = [red_circle, blue_circle, big_blue]
    assert referent(red_circle, things) == {"label": "circle", "colour": "red"}
    assert referent(blue_circle, things) == {"label": "circle", "size": "small", "colour": "blue"}
    assert referent(red_circle, things, without="colour") is None  # "the small circle" is two circles
    assert referent(big_blue, things, without="shape") == {"size": "large"}


def test_spatial_relation_only_when_one_axis_separates_the_boxes():
    def box(x1, y1, x2, y2):
        return Thing("square", (x1, y1, x2, y2), {})
    assert relation(box(0.0, 0.4, 0.2, 0.6), box(0.5, 0.45, 0.7, 0.65), 0.02) == "left"
    assert relation(box(0.3, 0.7, 0.5, 0.9), box(0.35, 0.1, 0.55, 0.3), 0.02) == "below"
    assert relation(box(0.0, 0.0, 0.2, 0.2), box(0.5, 0.5, 0.7, 0.7), 0.02) is None  # diagonal
    assert relation(box(0.0, 0.4, 0.2, 0.6), box(0.21, 0.4, 0.4, 0.6), 0.02) is None  # too close


# -- what a model that cannot see the image could exploit ----------------------------------------------

def test_the_counting_key_rank_is_uniform_over_a_build(oracle_questions):
    kept, _dropped, _rows = oracle_questions
    ranks = Counter(sorted(int(o) for o in q.options).index(int(q.options[q.answer]))
                    for q in kept if q.meta["template"] == "count")
    assert sum(ranks.values()) >= 30 and chisquare([ranks[r] for r in range(4)]).pvalue > 0.05, ranks


def test_the_identity_key_is_not_the_option_most_like_the_others(oracle_questions):
    kept, _dropped, _rows = oracle_questions
    identity = [q for q in kept if q.meta["template"] == "identity"]

    def shared_words(option, options):
        return sum(len(set(option.split()) & set(other.split())) for other in options if other != option)
    centroid_right = sum(
        1 for q in identity
        if max(range(4), key=lambda i: (shared_words(q.options[i], q.options), -i)) == q.answer)
    assert len(identity) >= 15 and centroid_right / len(identity) <= 0.4, (centroid_right, len(identity))


def test_text_distractors_are_real_strings_never_near_misspellings_of_the_key(oracle_questions):
    from difflib import SequenceMatcher

    kept, _dropped, rows = oracle_questions
    seen = {normalise_text(w) for row in rows.values() for w in row["truth"]["words"]}
    seen |= {normalise_text(w) for w in load_vocabulary().words}
    for q in (q for q in kept if q.meta["template"] == "text"):
        key = q.options[q.answer]
        for option in q.options:
            assert normalise_text(option) in seen
            if option != key:
                assert SequenceMatcher(None, option, key).ratio() < 0.75, (key, option)


# -- every question has exactly one true option, judged from its text and the scene's truth -------------

def _scene_items(seed: int, n: int) -> list[tuple[Image, list[Fact], dict]]:
    from benchsmith.paths import truetype_font
    from ingest.scenes import render_scene, scene_words

    font, words = truetype_font(), scene_words()
    out = []
    for index in range(n):
        _img, row = render_scene(seed, index, font, words)
        image = Image(id=f"{seed}-{index}", path=f"{seed}-{index}.png", width=640, height=480)
        out.append((image, supplied_facts(image, row), row))
    return out


def _pixels(box) -> tuple[float, float, float, float]:
    return box[0] * 640, box[1] * 480, box[2] * 640, box[3] * 480


def _the(row: dict, phrase: str) -> dict:
    """The one object of the scene that 'the large red circle' (or 'the small object') names."""
    *adjectives, noun = phrase.removeprefix("the ").split()
    found = [o for o in row["objects"] if noun in ("object", o["label"])
             and all(a in (o["attributes"]["size"], o["attributes"]["colour"]) for a in adjectives)]
    assert len(found) == 1, (phrase, found)
    return found[0]


def _how_many(row: dict, what: str) -> int:
    objects, signs = row["objects"], row["truth"]["signs"]
    if what == "shapes":
        return len(objects)
    if what == "objects":  # signs are objects too
        return len(objects) + len(signs)
    colour, _, noun = what.rpartition(" ")
    if colour and noun in ("shapes", "objects"):
        white_signs = len(signs) if noun == "objects" and colour == "white" else 0
        return sum(o["attributes"]["colour"] == colour for o in objects) + white_signs
    assert not colour, what
    return sum(o["label"] + "s" == what for o in objects)


def _is(label: str, option: str) -> bool:
    """Whether an option names `label`, in the singular or the plural."""
    return option in (label, label + "s", label + "es")


def _true_options(question, row: dict) -> list[bool]:
    """Which options are true of the scene, read from the question's text alone."""
    text, options = question.text, question.options
    if m := re.fullmatch(r"How many (.+) are there in the image\?", text):
        return [option == str(_how_many(row, m[1])) for option in options]
    if m := re.fullmatch(r"In which part of the image is (.+)\?", text):
        return [option == region_of(_the(row, m[1])["box"]) for option in options]
    if m := re.fullmatch(r"Where is (.+) relative to (.+)\?", text):
        ax1, ay1, ax2, ay2 = _pixels(_the(row, m[1])["box"])
        bx1, by1, bx2, by2 = _pixels(_the(row, m[2])["box"])
        cx, cy = (ax1 + ax2) / 2, (ay1 + ay2) / 2  # where a's centre lies beyond b's box
        holds = {"to its left": cx < bx1, "to its right": cx > bx2, "above it": cy < by1, "below it": cy > by2}
        return [holds[option] for option in options]
    if m := re.fullmatch(r"What (colour|shape) is (.+)\?|How large is (.+) compared with the other objects\?", text):
        attribute, phrase = (m[1], m[2]) if m[1] else ("size", m[3])
        return [option == _the(row, phrase)["attributes"][attribute] for option in options]
    if text == "Which of these can be seen in the image?":
        seen = {f"{o['attributes']['colour']} {o['label']}" for o in row["objects"]}
        return [option in seen for option in options]
    if m := re.fullmatch(r"Which of these (?:is|are) there exactly (\w+) of in the image\?", text):
        n = ("one", "two", "three", "four", "five", "six").index(m[1]) + 1
        return [sum(_is(o["label"], option) for o in row["objects"]) == n for option in options]
    if m := re.fullmatch(r"Which of these is in the (.+) of the image\?", text):
        return [any(_is(o["label"], option) and region_of(o["box"]) == m[1] for o in row["objects"])
                for option in options]
    if m := re.fullmatch(r"Which of these is (to the left of|to the right of|above|below) (.+)\?", text):
        anchor = _the(row, m[2])
        bx1, by1, bx2, by2 = _pixels(anchor["box"])

        def beyond(o):  # the object's centre lies beyond the anchor's box on the side asked about
            ax1, ay1, ax2, ay2 = _pixels(o["box"])
            cx, cy = (ax1 + ax2) / 2, (ay1 + ay2) / 2
            return {"to the left of": cx < bx1, "to the right of": cx > bx2, "above": cy < by1, "below": cy > by2}[m[1]]
        return [any(_is(o["label"], option) and o is not anchor and beyond(o) for o in row["objects"])
                for option in options]
    if text in ("What does the text in the image say?", "Which of these words is written in the image?"):
        return [option.casefold() in {w.casefold() for w in row["truth"]["words"]} for option in options]
    raise AssertionError(f"a question the checker cannot read: {text}")


def test_no_kept_question_on_random_scenes_has_two_true_options():
    seed, settings = 11, ProgrammaticSettings(per_dimension=10)
    items = _scene_items(seed, 150)
    vocabulary = load_vocabulary().widened([f for _i, facts, _r in items for f in facts], settings)
    questions = [q for image, facts, _row in items for key in DIMENSIONS
                 for q in generate(image, facts, registry().get(key), vocabulary, settings, seed=seed)]
    kept, _dropped = gate(questions, {}, QualitySettings())
    rows = {image.id: row for image, _f, row in items}
    wrong = []
    for question in kept:
        truth = _true_options(question, rows[question.item_id])
        if sum(truth) != 1 or not truth[question.answer]:
            wrong.append((question.text, question.options, question.options[question.answer], truth))
    assert len(kept) > 1000 and Counter(q.meta["template"] for q in kept).keys() == {
        "count", "location", "spatial", "attribute", "identity", "text", "count_choice", "location_choice",
        "spatial_choice"}
    assert not wrong, f"{len(wrong)} of {len(kept)}: {wrong[:5]}"


# -- through the CLI ---------------------------------------------------------------------------------

def _generated(tmp_path, dimension: str, images: dict[str, list[tuple]]) -> list:
    """`benchsmith generate` over images given as (label or text, box, colour) facts: an OCR fact when
    the colour is "text"."""
    from benchsmith.store import Store
    from tests.generators.test_cli import run

    facts = []
    for image, found in images.items():
        for what, (x1, y1, x2, y2), colour in found:
            if colour == "text":
                facts.append(Fact(item_id=image, kind="ocr", text=what, provenance=SUPPLIED,
                                  quad=((x1, y1), (x2, y1), (x2, y2), (x1, y2))))
            else:
                facts.append(Fact(item_id=image, kind="object", text=what, box=(x1, y1, x2, y2), provenance=SUPPLIED,
                                  attributes={"colour": colour, "size": "medium"}))
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        store.add_items([Image(id=image, path=f"{image}.png", width=640, height=480) for image in images])
        store.add_facts("supplied", facts)
    done = run(tmp_path, "generate", "--generator", "programmatic", "--dimension", dimension,
               BENCHSMITH__GENERATE__PROGRAMMATIC__PER_DIMENSION="20")
    assert done.returncode == 0, done.stderr
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        return store.get_questions()


def test_a_near_diagonal_pair_is_never_asked_about(tmp_path):
    made = _generated(tmp_path, "spatial_relation", {"img": [
        ("circle", (0.40, 0.40, 0.60, 0.60), "red"),
        ("square", (0.10, 0.42, 0.30, 0.58), "blue"),     # level with the circle, to its left
        ("triangle", (0.42, 0.10, 0.58, 0.30), "green"),  # straight above it
        ("star", (0.65, 0.58, 0.85, 0.78), "pink"),       # right of and below it: the boxes share 2% of height
    ]})
    assert {q.text for q in made} == {"Where is the square relative to the circle?",
                                      "Where is the circle relative to the square?",
                                      "Where is the triangle relative to the circle?",
                                      "Where is the circle relative to the triangle?"}
    keys = {q.text: q.options[q.answer] for q in made if q.status == "candidate"}
    assert keys and keys.items() <= {"Where is the square relative to the circle?": "to its left",
                                     "Where is the circle relative to the square?": "to its right",
                                     "Where is the triangle relative to the circle?": "above it",
                                     "Where is the circle relative to the triangle?": "below it"}.items()


def test_the_count_of_everything_says_what_it_counts_beside_a_sign(tmp_path):
    shapes = ["circle", "square", "triangle", "star"]
    images = {f"shapes{n}": [(shapes[i], (0.2 * i, 0.6, 0.2 * i + 0.1, 0.7), "red") for i in range(n)]
              for n in range(1, 5)}
    images["shapes4"].append(("TEA", (0.1, 0.1, 0.3, 0.2), "text"))   # a sign: an object, though not a shape
    images["street"] = [("dog", (0.1, 0.6, 0.3, 0.8), "brown"), ("car", (0.5, 0.6, 0.9, 0.9), "red"),
                        ("STOP", (0.1, 0.1, 0.3, 0.2), "text")]
    made = _generated(tmp_path, "instances_counting", images)
    everything = {q.item_id: q for q in made if q.meta.get("filter") == {}}
    assert {item: q.text for item, q in everything.items()} == {
        f"shapes{n}": "How many shapes are there in the image?" for n in range(1, 5)}  # the street: not asked
    assert all(q.options[q.answer] == q.item_id[-1] for q in everything.values() if q.status == "candidate")
    assert not [q.text for q in made if "objects" in q.text and q.item_id.startswith("shapes")]


def test_a_word_read_both_from_the_manifest_and_by_ocr_is_asked_about_once_as_supplied():
    def read(text, box, backend="rapidocr", score=0.95):
        x1, y1, x2, y2 = box
        return Fact(item_id="sign", kind="ocr", text=text, quad=((x1, y1), (x2, y1), (x2, y2), (x1, y2)),
                    provenance=SUPPLIED if backend == "supplied" else Provenance(backend=backend),
                    score=None if backend == "supplied" else score)

    facts = [read("SALE", (0.1, 0.1, 0.3, 0.2), "supplied"), read("SALE", (0.11, 0.1, 0.3, 0.21)),
             read("SAIE", (0.1, 0.1, 0.29, 0.2), score=0.99), read("OPEN", (0.6, 0.6, 0.8, 0.7))]
    image = Image(id="sign", path="sign.png", width=640, height=480)
    dimension = next(d for d in registry() if d.key == "text_understanding")
    made = generate(image, facts, dimension, load_vocabulary(), ProgrammaticSettings())
    assert sorted(q.options[q.answer] for q in made) == ["OPEN", "SALE"]
    assert all("SAIE" not in q.options for q in made)


def test_an_object_supplied_under_two_settings_of_the_extractor_is_counted_once():
    """Changing `extract.extractors.supplied.kinds` restates the annotations under a new key; the old facts
    stay in the store."""
    def circle(provenance, box=(0.1, 0.1, 0.2, 0.2)):
        return Fact(item_id="img", kind="object", text="circle", box=box, attributes={"colour": "red"},
                    provenance=provenance)

    before, after = Provenance(backend="supplied", params={"kinds": ["objects"]}), SUPPLIED
    things = things_in([circle(before), circle(after), circle(after, box=(0.5, 0.5, 0.6, 0.6))])
    assert [t.box for t in things] == [(0.1, 0.1, 0.2, 0.2), (0.5, 0.5, 0.6, 0.6)]
