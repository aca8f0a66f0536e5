import pytest
from PIL import Image as PILImage

from benchsmith.records import Image
from extractors.base import Loaded, build_extractors
from tests.extractors import tiny_models


@pytest.fixture(scope="module")
def florence_folder(tmp_path_factory):
    return tiny_models.florence2(tmp_path_factory.mktemp("florence2"))


@pytest.fixture
def florence(configure, florence_folder):
    settings = configure({"extractors": {"f2": {
        "backend": "florence2", "model": str(florence_folder), "max_new_tokens": 8, "num_beams": 1,
        "tasks": ["<DETAILED_CAPTION>", "<OD>", "<DENSE_REGION_CAPTION>", "<OCR_WITH_REGION>"]}}})
    extractor, = build_extractors(settings, only=["f2"])
    extractor.load()
    return extractor


IMAGE = Image(id="img", path="a.png", width=200, height=100)


def test_every_task_runs_on_a_batch_through_the_production_model_path(florence):
    images = [Loaded(IMAGE, PILImage.new("RGB", (200, 100), (250, 250, 250))),
              Loaded(IMAGE.model_copy(update={"id": "img2"}), PILImage.new("RGB", (90, 120), (20, 20, 200)))]
    facts = florence.extract(images)
    assert len(facts) == 2
    assert all(f.item_id == loaded.image.id for found, loaded in zip(facts, images) for f in found)


def test_parsed_answers_become_facts_in_unit_coordinates(florence):
    processor = florence.processor

    def parsed(task, text):
        return processor.post_process_generation(text, task=task, image_size=(200, 100))[task]

    car, = florence.facts_from_answer(IMAGE, "<OD>", parsed("<OD>", "<s>car<loc_100><loc_200><loc_300><loc_400></s>"),
                                      200, 100)
    assert car.kind == "object" and car.text == "car"
    assert car.box == pytest.approx((0.1, 0.2, 0.3, 0.4), abs=0.003)
    region, = florence.facts_from_answer(
        IMAGE, "<DENSE_REGION_CAPTION>",
        parsed("<DENSE_REGION_CAPTION>", "<s>a red circle<loc_0><loc_0><loc_500><loc_999></s>"), 200, 100)
    assert region.kind == "region" and region.text == "a red circle"
    assert region.box == pytest.approx((0.0, 0.0, 0.5, 1.0), abs=0.011)  # pixel-integer bins
    caption, = florence.facts_from_answer(IMAGE, "<DETAILED_CAPTION>", parsed("<DETAILED_CAPTION>",
                                                                              "<s>a  red circle</s>"), 200, 100)
    assert (caption.kind, caption.text) == ("caption", "a red circle")
    assert florence.facts_from_answer(IMAGE, "<CAPTION>", "", 200, 100) == []
