"""The programmatic generator on the oracle scenes, scored by a checker that reads only the truth."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import replace

import pytest
from scipy.stats import chi2, chisquare

from benchsmith.dimensions import registry
from benchsmith.records import Fact, Image, Provenance, normalise_text
from ingest.scenes import region_of
from filters.quality import QualitySettings, balance_answers, gate
from generators.programmatic import (RELATIONS, ProgrammaticSettings, Thing, count_options, generate,
                                     load_vocabulary, referent, relation)

SUPPLIED = Provenance(backend="supplied")
DIMENSIONS = ["instances_counting", "instance_location", "spatial_relation", "instance_attributes",
              "instance_identity", "text_understanding"]


def oracle_items(oracle_dir) -> list[tuple[Image, list[Fact], dict]]:
    """Images and facts built straight from the manifest, as the supplied extractor would."""
    out = []
    for line in (oracle_dir / "manifest.jsonl").read_text().splitlines():
        row = json.loads(line)
        image = Image(id=row["path"], path=row["path"], width=640, height=480)
        facts = [Fact(item_id=image.id, kind="object", text=o["label"], box=tuple(o["box"]),
                      attributes=o["attributes"], provenance=SUPPLIED) for o in row["objects"]]
        for o in row["ocr"]:
            x1, y1, x2, y2 = o["box"]
            facts.append(Fact(item_id=image.id, kind="ocr", text=o["text"], quad=((x1, y1), (x2, y1), (x2, y2), (x1, y2)),
                              provenance=SUPPLIED))
        out.append((image, facts, row))
    return out


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
    if meta["template"] == "text":
        words = {normalise_text(w) for w in row["truth"]["words"]}
        return [normalise_text(option) in words for option in options]
    raise AssertionError(f"unknown template {meta['template']}")


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
    assert set(per_template) == {"count", "location", "spatial", "attribute", "identity", "text"}
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
    support = ("0", "1", "2", "3", "4")
    seen = Counter()
    for true in range(5):
        for _ in range(200):
            options = count_options(true, support, rng)
            assert options[0] == true and true not in options[1:] and len(set(options)) == 4
            seen.update(options[1:])
    assert set(seen) == set(range(5)) and chisquare(list(seen.values())).pvalue > 0.01  # 0 is a distractor too


def test_the_support_is_the_most_frequent_keys_and_common_keys_are_kept_less_often():
    vocabulary = replace(load_vocabulary(), keys={"count:label": {"0": 40, "1": 100, "2": 50, "3": 30, "4": 5}})
    assert vocabulary.support("count:label") == ("0", "1", "2", "3")  # 4 x 30 beats 5 x 5
    assert vocabulary.keep_chance("count:label", "1") == 0.3 and vocabulary.keep_chance("count:label", "3") == 1.0
    assert vocabulary.keep_chance("count:label", "4") == 0.0
    assert load_vocabulary().support("count:label") == ("0", "1", "2", "3", "4", "5")  # not widened: the fallback


def test_a_count_outside_the_support_is_dropped_with_its_reason():
    vocabulary = replace(load_vocabulary(), keys={"count:all": {"1": 9, "2": 9, "3": 9, "4": 9},
                                                  "count:label": {"0": 9, "1": 9, "2": 9, "3": 9},
                                                  "count:colour": {"0": 9, "1": 9, "2": 9, "3": 9}})
    image = Image(id="img", path="img.png", width=640, height=480)
    facts = [Fact(item_id="img", kind="object", text="star", box=(0.1 * i, 0.1, 0.1 * i + 0.05, 0.2),
                  attributes={"colour": "red"}, provenance=SUPPLIED) for i in range(6)]
    questions = generate(image, facts, registry().get("instances_counting"), vocabulary,
                         ProgrammaticSettings(per_dimension=10), seed=0)
    by_filter = {json.dumps(q.meta["filter"]): q for q in questions}
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
    assert len(frequent) >= 8
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
