import random
from difflib import SequenceMatcher

from benchsmith.records import matching_ratio


def test_matching_ratio_is_difflibs_ratio():
    rng = random.Random(7)
    pairs = [("", ""), ("", "ab"), ("abc", ""), ("blue star", "blue circle"), ("the dog", "the dog"),
             ("(0.02, 0.02) to (0.45, 0.44)", "(0.52, 0.02) to (0.95, 0.44)"), ("x" * 250, "x" * 180 + "y" * 70)]
    for _ in range(20_000):  # few letters: many ties between equally long matches, where the order matters
        pairs.append(tuple("".join(rng.choice("ab c") for _ in range(rng.randint(0, 24))) for _ in range(2)))
    for a, b in pairs:
        assert matching_ratio(a, b) == SequenceMatcher(None, a, b).ratio(), (a, b)
