"""Counting questions say the plural of every label the shipped vocabularies can produce correctly."""

from pathlib import Path

import pytest

from generators.programmatic import load_vocabulary, plural

ROOT = Path(__file__).resolve().parents[2]


def shipped_labels() -> list[str]:
    objects = [line.strip() for line in (ROOT / "data/vocabularies/objects.txt").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    return sorted({*objects, *load_vocabulary().labels})


@pytest.mark.parametrize("label, expected", [
    ("goose", "geese"), ("deer", "deer"), ("scissors", "scissors"), ("glasses", "glasses"), ("person", "people"),
    ("bus", "buses"), ("box", "boxes"), ("knife", "knives"), ("cherry", "cherries"), ("traffic light", "traffic lights"),
    ("skis", "skis"), ("stairs", "stairs"), ("mouse", "mice"), ("toy", "toys")])
def test_plural_of_known_labels(label, expected):
    assert plural(label, load_vocabulary()) == expected


def test_no_shipped_label_gets_a_doubled_plural_ending():
    vocabulary = load_vocabulary()
    wrong = {}
    for label in shipped_labels():
        said = plural(label, vocabulary)
        last = label.split()[-1]
        doubled = said.endswith("ss") and not last.endswith("ss")  # 'glassess', 'skiss'
        stacked = said != label and said.endswith("ses") and last.endswith("s") and not last.endswith(("ss", "us", "is"))  # 'scissorses'
        if doubled or stacked:
            wrong[label] = said
    assert not wrong


def test_vocabulary_table_overrides_the_library():
    vocabulary = load_vocabulary()
    assert vocabulary.plurals["bus"] == plural("bus", vocabulary) == "buses"
