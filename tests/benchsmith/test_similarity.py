import random
from difflib import SequenceMatcher

from benchsmith.similarity import jaccard, levenshtein, matching_ratio, word_overlap


def test_matching_ratio_is_difflibs_ratio():
    rng = random.Random(7)
    pairs = [("", ""), ("", "ab"), ("abc", ""), ("blue star", "blue circle"), ("the dog", "the dog"),
             ("(0.02, 0.02) to (0.45, 0.44)", "(0.52, 0.02) to (0.95, 0.44)"), ("x" * 250, "x" * 180 + "y" * 70)]
    for _ in range(20_000):  # few letters: many ties between equally long matches, where the order matters
        pairs.append(tuple("".join(rng.choice("ab c") for _ in range(rng.randint(0, 24))) for _ in range(2)))
    for a, b in pairs:
        assert matching_ratio(a, b) == SequenceMatcher(None, a, b).ratio(), (a, b)


def test_edit_distance_matches_the_textbook_table():
    def table(a: str, b: str) -> int:
        row = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            previous, row[0] = row[0], i
            for j, cb in enumerate(b, 1):
                previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
        return row[-1]

    rng = random.Random(0)
    for _ in range(2000):
        a = "".join(rng.choice("abc ") for _ in range(rng.randrange(14)))
        b = "".join(rng.choice("abc ") for _ in range(rng.randrange(14)))
        assert levenshtein(a, b) == table(a, b), (a, b)


def test_word_overlap_is_shared_words_over_all_words_whatever_the_case_and_punctuation():
    assert word_overlap("A red car.", "the RED car") == 2 / 4
    assert word_overlap("", "") == 0.0 and jaccard(set(), set()) == 0.0
    assert word_overlap("dog", "dog!") == 1.0
