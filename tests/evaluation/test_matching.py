import pytest

from evaluation.matching import match_choice

OPTIONS = ["red", "dark red", "blue", "green"]


@pytest.mark.parametrize("reply, expected", [
    ("B", (1, "letter")),
    ("(C)", (2, "letter")),
    ("c.", (None, "")),                       # a lower-case letter alone is not an answer
    ("D.", (3, "letter")),
    ("Answer: D", (3, "letter")),
    ("The answer is (B).", (1, "letter")),
    ("The correct option is C because the sky is blue.", (2, "letter")),
    ("B. dark red", (1, "letter")),
    ("(A) red", (0, "letter")),
    ("I think it is blue.", (2, "option_text")),
    ("dark red", (1, "option_text")),         # "red" is inside "dark red": the longer option wins
    ("It is red or green.", (None, "")),       # two options named
    ("(A) or (B)", (None, "")),                # two letters
    ("A or B", (None, "")),
    ("I cannot tell from the picture.", (None, "")),
    ("E", (None, "")),                         # no such option
])
def test_replies_in_the_forms_models_answer_in(reply, expected):
    assert match_choice(reply, OPTIONS) == expected


def test_an_article_is_not_a_letter():
    assert match_choice("A green square in the corner", OPTIONS) == (3, "option_text")


def test_three_options_refuse_the_fourth_letter():
    assert match_choice("D", ["one", "two", "three"]) == (None, "")
