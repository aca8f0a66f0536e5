"""Majority decisions and agreement, on small hand-checked examples."""

from __future__ import annotations

from fractions import Fraction

import pytest

from annotation.reconcile import agreement_by_dimension, decide, kappa, majority
from benchsmith.records import Provenance, Question, Review


def question(dimension_id: int = 3, answer: int = 0) -> Question:
    return Question(item_id="img", dimension_id=dimension_id, text=f"q{dimension_id}{answer}",
                    options=["a", "b", "c", "d"], answer=answer, provenance=Provenance(backend="template"))


def review(q: Question, who: str, *, keep: bool = True, answer: int | None = 0, dimension_id: int | None = 3,
           reasons: tuple[str, ...] = ()) -> Review:
    return Review(question_id=q.id, task_id=1, annotation_id=hash(who) % 1000, annotator=who, keep=keep,
                  answer=answer, dimension_id=dimension_id, reasons=list(reasons))


def test_majority_needs_more_than_half_and_abstentions_never_win():
    assert majority(["A", "A", "B"]) == "A"
    assert majority(["A", "B"]) is None
    assert majority(["A", "B", "C"]) is None
    assert majority([None, None, "A"]) is None
    assert majority([None, "A", "A"]) == "A"


def test_agreeing_keepers_accept_the_human_answer_and_dimension():
    q = question(dimension_id=3, answer=0)
    decision = decide(q, [review(q, "x", answer=2, dimension_id=4), review(q, "y", answer=2, dimension_id=4)], 2)
    assert decision.outcome == "accepted"
    assert decision.reviewed == {"review_answer": 2, "review_dimension_id": 4}


def test_discards_reject_with_the_most_named_reason_first():
    q = question()
    decision = decide(q, [review(q, "x", keep=False, reasons=("ambiguous", "bad_image")),
                          review(q, "y", keep=False, reasons=("bad_image",))], 2)
    assert decision.outcome == "rejected"
    assert decision.details["reasons"] == ["bad_image", "ambiguous"]


@pytest.mark.parametrize("second, unsettled", [
    ({"keep": False}, ("keep or discard",)),
    ({"answer": 1}, ("answer",)),
    ({"dimension_id": 5}, ("dimension",)),
    ({"answer": 1, "dimension_id": 5}, ("answer", "dimension")),
])
def test_ties_are_flagged_with_what_is_unsettled(second, unsettled):
    q = question()
    decision = decide(q, [review(q, "x"), review(q, "y", **second)], 2)
    assert decision.outcome == "flagged"
    assert decision.details["unsettled"] == list(unsettled)


def test_a_third_review_breaks_a_tie():
    q = question()
    reviews = [review(q, "x", answer=0), review(q, "y", answer=1), review(q, "z", answer=1)]
    assert decide(q, reviews, 2).reviewed["review_answer"] == 1


def test_fewer_reviews_than_the_overlap_wait():
    q = question()
    assert decide(q, [], 2).outcome == "waiting"
    assert decide(q, [review(q, "x")], 2).outcome == "waiting"
    assert decide(q, [review(q, "x")], 1).outcome == "accepted"


def test_cohen_kappa_by_hand():
    # x: A A B B A   y: A B B B A -> observed 4/5; x marginals A 3/5 B 2/5, y A 2/5 B 3/5
    # expected = 3/5*2/5 + 2/5*3/5 = 12/25; kappa = (4/5 - 12/25) / (1 - 12/25) = 8/13
    ratings = {f"q{i}": {"x": x, "y": y} for i, (x, y) in enumerate(zip("AABBA", "ABBBA"))}
    result = kappa(ratings)
    assert result.method == "cohen" and result.n_items == 5
    assert result.kappa == pytest.approx(float(Fraction(8, 13)))


def test_fleiss_kappa_by_hand_with_three_raters():
    # item ratings: (A,A,A) (A,A,B) (B,B,B) (A,B,B)
    # P_i = (sum n_ij^2 - 3) / 6: 1, 1/3, 1, 1/3 -> mean 2/3
    # p_A = 6/12, p_B = 6/12 -> expected 1/2; kappa = (2/3 - 1/2) / (1/2) = 1/3
    ratings = {"q1": {"x": "A", "y": "A", "z": "A"}, "q2": {"x": "A", "y": "A", "z": "B"},
               "q3": {"x": "B", "y": "B", "z": "B"}, "q4": {"x": "A", "y": "B", "z": "B"}}
    result = kappa(ratings)
    assert result.method == "fleiss"
    assert result.kappa == pytest.approx(1 / 3)


def test_kappa_ignores_single_ratings_and_is_undefined_without_variation():
    assert kappa({"q1": {"x": "A"}}).kappa is None
    assert kappa({"q1": {"x": "A", "y": "A"}, "q2": {"x": "A", "y": "A"}}).kappa is None
    assert kappa({"q1": {"x": "A", "y": "B"}, "q2": {"x": "B", "y": "A"}}).kappa == pytest.approx(-1)


def test_agreement_is_grouped_by_the_generator_dimension():
    q3, q5 = question(dimension_id=3), question(dimension_id=5)
    reviews = [review(q3, "x", answer=0), review(q3, "y", answer=1), review(q5, "x"), review(q5, "y", keep=False)]
    groups = agreement_by_dimension([q3, q5], reviews)
    assert set(groups) == {"3", "5", "all"}
    assert groups["3"]["answer"].n_items == 1 and groups["all"]["keep"].n_items == 2
