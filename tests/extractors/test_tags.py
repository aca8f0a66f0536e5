import pytest
from PIL import Image as PILImage

from benchsmith.records import Image
from extractors.base import Loaded, build_extractors
from extractors.tags import ClipScorer, load_attributes, load_vocabulary
from tests.extractors import tiny_models


@pytest.fixture(scope="module")
def clip_folder(tmp_path_factory):
    return tiny_models.clip(tmp_path_factory.mktemp("clip"))


def loaded(colour, name):
    return Loaded(Image(id=name, path=f"{name}.png", width=48, height=40), PILImage.new("RGB", (48, 40), colour))


def test_the_packaged_vocabularies_are_broad_and_clean():
    objects = load_vocabulary("objects")
    assert len(objects) >= 300
    assert all(label == label.strip().lower() and not label.startswith("#") for label in objects)
    attributes = load_attributes("attributes")
    assert {"colour", "material", "shape", "size"} <= set(attributes)


def test_tags_are_the_top_k_labels_of_the_vocabulary_above_the_threshold(configure, clip_folder, tmp_path):
    vocabulary = tmp_path / "shapes.txt"
    vocabulary.write_text("# test labels\ncircle\nsquare\ndog\ncar\nsign\n")
    settings = configure({"extractors": {
        "top3": {"backend": "clip_tags", "model": str(clip_folder), "vocabulary": str(vocabulary), "top_k": 3,
                 "threshold": 0.0},
        "sure": {"backend": "clip_tags", "model": str(clip_folder), "vocabulary": str(vocabulary), "top_k": 3,
                 "threshold": 0.99}}})
    top3, sure = build_extractors(settings, only=["top3", "sure"])
    top3.load()
    sure.load()
    images = [loaded((220, 30, 30), "red"), loaded((30, 30, 220), "blue")]
    for facts in top3.extract(images):
        assert len(facts) == 3
        assert {f.text for f in facts} <= {"circle", "square", "dog", "car", "sign"}
        scores = [f.score for f in facts]
        assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1.0001
    assert sure.extract(images) == [[], []], "a near-uniform tiny model is never 99% sure"


def test_editing_the_vocabulary_changes_the_key(configure, clip_folder, tmp_path):
    vocabulary = tmp_path / "v.txt"
    vocabulary.write_text("circle\nsquare\n")
    settings = configure({"extractors": {"t": {"backend": "clip_tags", "model": str(clip_folder),
                                               "vocabulary": str(vocabulary)}}})
    before = build_extractors(settings, only=["t"])[0].key
    load_vocabulary.cache_clear()
    vocabulary.write_text("circle\nsquare\nstar\n")
    assert build_extractors(settings, only=["t"])[0].key != before
    load_vocabulary.cache_clear()


def test_labels_and_attributes_come_from_their_vocabularies(configure, clip_folder):
    scorer = ClipScorer(str(clip_folder), "labeller", configure({}))
    crops = [PILImage.new("RGB", (20, 30), (200, 40, 40)), PILImage.new("RGB", (30, 20), (40, 200, 40))]
    embeddings = scorer.image_embeddings(crops)
    labels = scorer.label(embeddings, ["circle", "square", "dog"])
    assert [label for label, _ in labels] and all(label in {"circle", "square", "dog"} for label, _ in labels)
    vocabulary = {"colour": ("red", "green", "blue"), "size": ("small", "large")}
    every = scorer.attributes(embeddings, [label for label, _ in labels], vocabulary, min_score=0.0)
    assert all(set(found) == {"colour", "size"} and found["colour"] in vocabulary["colour"] for found in every)
    assert scorer.attributes(embeddings, [label for label, _ in labels], vocabulary, min_score=0.99) == [{}, {}]
