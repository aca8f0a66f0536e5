"""Grouping images into sets by their facts: alike with every member, greedy in id order, capped."""

from __future__ import annotations

from generators.set_grouping import SetSettings, grouped
from benchsmith.similarity import word_set

CAPTIONS = {"d": "a red bus on a city street", "a": "a red bus on a busy street", "c": "a cat asleep on a sofa",
            "b": "a red bus on a wet city street", "e": "a cat asleep on a blue sofa"}


def test_similar_captions_group_in_id_order_and_every_member_is_alike_with_every_other():
    words = {i: word_set(c) for i, c in CAPTIONS.items()}
    assert grouped(words, SetSettings(by="captions", min_overlap=0.5)) == [["a", "b"], ["c", "e"]]
    assert grouped(words, SetSettings(size=3, by="captions", min_overlap=0.5)) == [["a", "b", "d"]]
    assert grouped(words, SetSettings(by="captions", min_overlap=0.5), room=1) == [["a", "b"]]


def test_shared_labels_group_and_an_image_without_any_stays_out():
    labels = {"x": frozenset({"dog", "ball"}), "y": frozenset(), "z": frozenset({"ball"}), "w": frozenset({"dog"})}
    assert grouped(labels, SetSettings(size=2)) == [["w", "x"]]
    assert grouped(labels, SetSettings(size=3)) == []  # z and w share no label
