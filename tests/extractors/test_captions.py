import pytest

from extractors.run import extract
from tests.extractors import tiny_models


@pytest.fixture(scope="module")
def blip_folder(tmp_path_factory):
    return tiny_models.blip(tmp_path_factory.mktemp("blip"))


@pytest.fixture(scope="module")
def florence_folder(tmp_path_factory):
    return tiny_models.florence2(tmp_path_factory.mktemp("florence2"))


def test_two_captioners_run_side_by_side_and_keep_their_own_provenance(store, configure, ingested, blip_folder,
                                                                        florence_folder):
    settings = configure({"extractors": {
        "blip": {"backend": "caption", "model": str(blip_folder), "max_new_tokens": 6, "batch_size": 4},
        "florence": {"backend": "florence2", "model": str(florence_folder), "tasks": ["<CAPTION>"],
                     "max_new_tokens": 6, "num_beams": 1}}})
    reports = extract(store, settings, only=["blip", "florence"])
    assert [(r.done, r.failed) for r in reports.values()] == [(6, 0), (6, 0)]
    assert reports["blip"].config_key != reports["florence"].config_key
    facts = store.get_facts([i.id for i in ingested], kinds=["caption"])
    for image in ingested:
        blip_captions = [f for f in facts[image.id] if f.provenance.backend == "caption"]
        assert len(blip_captions) == 1 and blip_captions[0].text.strip()
        assert blip_captions[0].provenance.model == str(blip_folder)
        assert blip_captions[0].provenance.params["max_new_tokens"] == 6


def test_a_prompted_captioner_returns_only_the_new_words(configure, blip_folder):
    from PIL import Image as PILImage

    from extractors.captions import Captioner

    captioner = Captioner(str(blip_folder), "blip", configure({}), prompt="a photo of", max_new_tokens=5, num_beams=1)
    plain = Captioner(str(blip_folder), "blip", configure({}), max_new_tokens=5, num_beams=1)
    red = PILImage.new("RGB", (40, 30), (220, 30, 30))
    prompted, = captioner([red])
    assert not prompted.startswith("a photo of")
    assert plain([red, red]) == plain([red]) * 2, "batched captions equal single ones"


def test_a_missing_model_folder_is_a_clear_error(configure, tmp_path):
    from benchsmith.models import ModelError
    from extractors.base import build_extractors

    empty = tmp_path / "no-model-here"
    empty.mkdir()
    extractor, = build_extractors(configure({"extractors": {"cap": {"backend": "caption", "model": str(empty)}}}),
                                  only=["cap"])
    with pytest.raises(ModelError, match=f"extractor 'cap' cannot load model {empty}"):
        extractor.load()
