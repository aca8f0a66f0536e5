"""Option priors catch construction artefacts and stay unsure on well-made options."""

from __future__ import annotations

from filters.blind import answer_rotated, outcome
from filters.solvers import PriorConfig, Query, choose
from filters.solvers.priors import PriorSolver


def knows(kind: str, query: Query, answer: int, **options) -> bool:
    [answered] = answer_rotated(PriorSolver(PriorConfig(kind=kind, **options)), [query], rotations=4)
    return outcome(answer, answered)["knows"]


def test_choose_breaks_ties_by_position_within_the_margin():
    assert choose([0.1, 0.5, 0.5, 0.2]) == 1
    assert choose([0.1, 0.45, 0.5, 0.2], tie_margin=0.1) == 1
    assert choose([0.1, 0.3, 0.5, 0.2], tie_margin=0.1) == 2


def test_longest_catches_a_detailed_answer_among_terse_distractors():
    query = Query("What is the man doing?", ("running", "sitting", "riding a red bicycle down a hill", "eating"))
    assert knows("longest", query, 2)
    assert not knows("longest", query, 0)


def test_longest_is_unsure_when_lengths_are_close_within_its_margin():
    query = Query("What colour is the circle?", ("red", "blue", "green", "purple"))
    assert knows("longest", query, 3)          # strictly longest
    assert not knows("longest", query, 3, tie_margin=0.5)  # not much longer: a tie


def test_overlap_catches_an_answer_leaked_into_the_question():
    query = Query("The sign by the red door reads 'bakery'. What does the sign say?",
                  ("pharmacy", "bakery", "library", "garage"))
    assert knows("overlap", query, 1)
    assert not knows("overlap", Query("What does the sign say?", query.options), 1)


def test_odd_one_out_catches_the_option_unlike_the_others():
    query = Query("What is on the table?", ("a red apple", "a red ball", "a red cup", "a laptop"))
    assert knows("odd_one_out", query, 3)


def test_odd_one_out_catches_one_plain_answer_among_absurd_distractors():
    query = Query("What colour is the star?", ("a violin made of soup", "blue", "the French Revolution",
                                               "a committee of invisible giraffes"))
    assert knows("odd_one_out", query, 1, tie_margin=0.2)


def test_odd_one_out_with_a_margin_ignores_small_length_differences():
    colours = Query("What colour?", ("red", "blue", "green", "pink"))
    assert knows("odd_one_out", colours, 0)  # 'red' is the shortest by a little
    assert not knows("odd_one_out", colours, 0, tie_margin=0.2)


def test_stop_words_are_settings():
    query = Query("Is it the one?", ("the", "one", "two", "three"))
    assert knows("overlap", query, 1)
    assert not knows("overlap", query, 1, ignore_words=["one"])
