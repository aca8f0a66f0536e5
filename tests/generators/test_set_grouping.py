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


def every_pair_tried(compared, settings: SetSettings, room=None) -> list[list[str]]:
    """The grouping rule read plainly: each image not yet taken, in id order, tries every later one."""
    from benchsmith.similarity import jaccard

    def alike(a, b):
        return bool(a & b) if settings.by == "labels" else jaccard(a, b) >= settings.min_overlap

    ids, taken, sets = sorted(i for i, f in compared.items() if f), set(), []
    for k, seed in enumerate(ids):
        if seed in taken or len(sets) == room:
            continue
        members = [seed]
        for other in ids[k + 1:]:
            if len(members) < settings.size and other not in taken and all(alike(compared[m], compared[other])
                                                                           for m in members):
                members.append(other)
        if len(members) == settings.size:
            sets.append(members)
            taken.update(members)
    return sets


def test_looking_only_at_images_that_share_a_label_or_word_gives_the_sets_of_trying_every_pair():
    import random

    rng = random.Random(3)
    for _ in range(400):
        vocabulary = [f"w{k}" for k in range(rng.randint(1, 10))]
        compared = {f"i{rng.randrange(10 ** 5):05d}": frozenset(
            rng.sample(vocabulary, rng.randint(0, min(4, len(vocabulary))))) for _ in range(rng.randint(0, 25))}
        settings = SetSettings(size=rng.randint(2, 4), by=rng.choice(["labels", "captions"]),
                               min_overlap=rng.choice([0.2, 0.5, 1.0]))
        room = rng.choice([None, 1, 3])
        assert grouped(compared, settings, room) == every_pair_tried(compared, settings, room), (compared, settings)
