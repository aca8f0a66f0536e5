"""The quality gate: each rule drops with a reason, and answer letters come out balanced."""

from __future__ import annotations

from collections import Counter

from benchsmith.records import Provenance, Question
from generators.quality import QualitySettings, balance_answers, gate

PROV = Provenance(backend="test")


def q(text: str, options: list[str], answer: int = 0, item: str = "img-1") -> Question:
    return Question(item_id=item, dimension_id=3, text=text, options=options, answer=answer, provenance=PROV)


def reasons(dropped) -> list[tuple[str, str]]:
    return [(verdict.rule, verdict.reason) for _q, verdict in dropped]


def test_a_well_formed_question_passes():
    kept, dropped = gate([q("What colour is the car?", ["red", "blue", "green", "white"])], {}, QualitySettings())
    assert len(kept) == 1 and dropped == []


def test_options_must_be_distinct_and_non_empty():
    kept, dropped = gate([q("What colour is the car?", ["red", "Red ", "green", "white"]),
                          q("What colour is the bus?", ["red", " ", "green", "white"])], {}, QualitySettings())
    assert kept == []
    assert reasons(dropped) == [("options", "two options are the same"), ("options", "an option is empty")]
    assert all(question.status == "dropped" and verdict.subject_id == question.id and not verdict.passed
               and verdict.stage == "quality" for question, verdict in dropped)


def test_catch_all_options_are_refused():
    _kept, dropped = gate([q("What is on the table?", ["a cup", "a plate", "All of the above", "a fork"]),
                           q("What is on the shelf?", ["a cup", "none of these", "a book", "a fork"])],
                          {}, QualitySettings())
    assert [rule for rule, _ in reasons(dropped)] == ["catch_all_option", "catch_all_option"]


def test_a_question_may_not_contain_its_answer():
    _kept, dropped = gate([q("Is the red car red or blue?", ["red", "blue", "green", "white"])], {}, QualitySettings())
    assert reasons(dropped) == [("answer_in_question", "the question contains its answer 'red'")]
    kept, _ = gate([q("What is the colour of the reddish car?", ["red", "blue", "green", "white"])], {},
                   QualitySettings())
    assert len(kept) == 1  # whole words only: 'reddish' does not give 'red' away


def test_near_duplicates_of_the_same_item_are_dropped_but_other_items_keep_theirs():
    first = q("What colour is the car?", ["red", "blue", "green", "white"])
    paraphrase = q("What colour is the car in the picture?", ["white", "red", "green", "blue"], answer=1)
    reworded = q("What is the colour of the car?", ["red", "blue", "green", "black"])
    other_item = q("What colour is the car?", ["red", "blue", "green", "white"], item="img-2")
    different = q("What colour is the bus?", ["red", "blue", "green", "white"])
    small = q("Where is the red circle relative to the blue star?", ["above it", "below it", "to its left", "to its right"])
    large = q("Where is the red circle relative to the blue square?", ["above it", "below it", "to its left", "to its right"])
    kept, dropped = gate([first, paraphrase, reworded, other_item, different, small, large], {}, QualitySettings())
    assert [k.text for k in kept] == ["What colour is the car?", "What colour is the car?", "What colour is the bus?",
                                      small.text, large.text]
    assert [rule for rule, _ in reasons(dropped)] == ["near_duplicate", "near_duplicate"]
    assert first.id in dropped[0][1].reason


def test_questions_already_stored_count_for_duplicates_and_the_cap():
    stored = [q(f"What is item {i}?", ["a", "b", "c", "d"]) for i in range(3)]
    kept, dropped = gate([q("What is item 1?", ["a", "b", "c", "d"]),
                          q("Where is the cat sitting?", ["sofa", "floor", "bed", "table"])],
                         {"img-1": stored}, QualitySettings(max_per_item=3))
    assert kept == []
    assert [rule for rule, _ in reasons(dropped)] == ["near_duplicate", "per_item_cap"]


def test_balanced_letters_keep_the_correct_option_and_are_reproducible():
    questions = [q(f"How many birds are on wire {i}?", [str(i), str(i + 1), str(i + 2), str(i + 3)])
                 for i in range(103)]
    balanced = balance_answers(questions, seed=3)
    counts = Counter(b.answer for b in balanced)
    assert max(counts.values()) - min(counts.values()) <= 1
    for before, after in zip(questions, balanced):
        assert after.id == before.id
        assert after.options[after.answer] == before.options[before.answer]
        assert sorted(after.options) == sorted(before.options)
    assert balance_answers(list(reversed(questions)), seed=3)[::-1] == balanced
    assert balance_answers(questions, seed=4) != balanced


def test_a_questions_letter_does_not_depend_on_what_else_is_balanced_with_it():
    # A distributed run commits each item's questions in its own shard, a local run in batches: the
    # letters must come out the same either way.
    questions = [q(f"How many cups are on shelf {i} of image {item}?", [f"{i}", f"{i + 1}", f"{i + 2}", f"{i + 3}"],
                   item=f"img-{item}") for item in range(60) for i in range(3)]
    together = {b.id: b for b in balance_answers(questions, seed=1)}
    for item in range(60):
        alone = balance_answers([x for x in questions if x.item_id == f"img-{item}"], seed=1)
        assert [together[b.id] for b in alone] == alone
        assert len({b.answer for b in alone}) == 3  # one item's questions get different letters
    counts = Counter(b.answer for b in together.values())
    assert min(counts.values()) >= 30, counts  # 180 keys spread over the four letters


def test_questions_that_speak_of_the_generators_sources_are_dropped():
    _kept, dropped = gate([q("According to the caption, what is on the table?", ["a cup", "a plate", "a bowl", "a fork"]),
                           q("Which bounding box holds the dog?", ["left", "right", "top", "bottom"]),
                           q("What does the OCR text say?", ["OPEN", "CLOSED", "EXIT", "STOP"])],
                          {}, QualitySettings())
    assert [(rule, reason) for rule, reason in reasons(dropped)] == [
        ("mentions_source", "speaks of 'caption' instead of the image"),
        ("mentions_source", "speaks of 'bounding box' instead of the image"),
        ("mentions_source", "speaks of 'ocr' instead of the image")]
    kept, _ = gate([q("What does the sign above the door say?", ["OPEN", "CLOSED", "EXIT", "STOP"])], {},
                   QualitySettings())
    assert len(kept) == 1


def test_distractors_made_from_the_key_are_dropped_with_the_reason():
    _kept, dropped = gate([
        q("What does the text in the image say?", ["COFBEE", "COFFEF", "COFFEE", "COFFE"], answer=2),
        q("Which of these can be seen in the image?", ["blue star", "white circle", "blue circle", "blue hexagon"],
          answer=2),
        q("What is happening in the image?", ["a man riding a brown horse on the beach",
                                              "a man riding a bicycle on the beach",
                                              "a woman riding a brown horse in a field",
                                              "a child walking a dog on the beach"])], {}, QualitySettings())
    rules = reasons(dropped)
    assert [rule for rule, _ in rules] == ["distractors_from_key"] * 3
    assert "small edit of the answer 'COFFEE'" in rules[0][1] and "small edit of the answer 'blue circle'" in rules[1][1]
    assert "most like the other three" in rules[2][1]


def test_distractors_of_the_same_kind_that_are_not_edits_of_the_key_pass():
    fair = [q("How many dogs are there in the image?", ["3", "4", "0", "5"]),
            q("Which of these can be seen in the image?", ["red star", "blue star", "red circle", "blue circle"]),
            q("Where is the red star relative to the blue circle?", ["to its left", "to its right", "above it",
                                                                    "below it"]),
            q("What does the sign say?", ["BAKERY", "HOTEL", "PHARMACY", "GARAGE"]),
            q("What does the text in the image say?", ["COFFEE", "COFFER", "TOFFEE", "MARKET"])]
    kept, dropped = gate(fair, {}, QualitySettings())
    assert reasons(dropped) == [] and len(kept) == 5


def test_the_centroid_margin_is_a_setting():
    question = q("What is happening in the image?", ["a man riding a brown horse on the beach",
                                                     "a man riding a bicycle on the beach",
                                                     "a woman riding a brown horse in a field",
                                                     "a child walking a dog on the beach"])
    kept, _dropped = gate([question], {}, QualitySettings(centroid_margin=0.5))
    assert kept == [question]


def test_a_question_its_generator_chose_not_to_ask_is_kept_as_dropped_with_its_reason():
    skipped = q("How many dogs are there in the image?", ["1", "0", "2", "3"]).model_copy(
        update={"meta": {"dropped": "the key '1' is already asked about more often than other keys"}})
    kept, dropped = gate([skipped], {}, QualitySettings())
    assert kept == [] and reasons(dropped) == [("unbalanced_key", skipped.meta["dropped"])]


def test_one_question_written_twice_with_two_keys_drops_both_drafts_and_other_options_are_other_questions():
    twice = [q("What colour is the car?", ["red", "blue", "green", "white"], answer=0),
             q("What colour is the car?", ["red", "blue", "green", "white"], answer=1),
             q("What colour is the car ?", ["red", "blue", "green", "black"], answer=0)]
    kept, dropped = gate(twice, {}, QualitySettings())
    assert kept == [] and {verdict.rule for _q, verdict in dropped} == {"ambiguous_draft"}
    assert len({question.id for question, _v in dropped}) == len(dropped) == 2  # one row per id
    assert "asked twice with different answers ('blue', 'red')" in dropped[0][1].reason
    seen = [q("Which of these can be seen in the image?", ["red star", "blue circle", "pink heart", "grey oval"]),
            q("Which of these can be seen in the image?", ["green square", "black square", "cyan oval", "gold ring"])]
    kept, dropped = gate(seen, {}, QualitySettings())
    assert len(kept) == 2 and dropped == []
    farthest = [q("Which of these places lies farthest up on the map?", ["Ashby", "Bramley", "Caldor", "Dunmore"]),
                q("Which of these places lies farthest up on the map?", ["Elsworth", "Ashby", "Glenby", "Hadley"])]
    kept, dropped = gate(farthest, {}, QualitySettings())  # Elsworth lies above Ashby: no contradiction
    assert len(kept) == 2 and dropped == []


def test_four_values_of_one_slot_are_honest_but_a_misspelt_or_reshuffled_key_is_not():
    honest = [q("Where is the red car?", ["left side", "top side", "right side", "bottom side"], answer=1),
              q("Which route runs directly between Elm Park and Mill Cross?", ["Route 59", "Route 12", "Route 33",
                                                                                "Route 17"]),
              q("What colour is the bus?", ["dark red", "dark blue", "dark green", "dark grey"], answer=2)]
    kept, dropped = gate(honest, {}, QualitySettings())
    assert reasons(dropped) == [] and len(kept) == 3
    made = [q("What does the shop sign say?", ["Main Street", "Mian Street", "Main Stret", "Maim Street"]),
            q("Which colour and shape is shown?", ["red car", "blue car", "red bus", "red van"])]
    _kept, dropped = gate(made, {}, QualitySettings())
    assert [rule for rule, _ in reasons(dropped)] == ["distractors_from_key"] * 2
