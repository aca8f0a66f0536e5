import numpy as np
import pytest
import torch
from PIL import Image as PILImage
from PIL import ImageDraw

from benchsmith.records import Image
from extractors.base import ExtractorError, Loaded, build_extractors
from extractors.sam import Instance, SamParams, mask_box, select_instances
from tests.extractors import tiny_models


@pytest.fixture(scope="module")
def clip_folder(tmp_path_factory):
    return tiny_models.clip(tmp_path_factory.mktemp("clip"))


@pytest.fixture(scope="module")
def blip_folder(tmp_path_factory):
    return tiny_models.blip(tmp_path_factory.mktemp("blip"))


def scene() -> Loaded:
    pixels = PILImage.new("RGB", (96, 64), (230, 230, 230))
    ImageDraw.Draw(pixels).ellipse((10, 10, 40, 40), fill=(220, 30, 30))
    return Loaded(Image(id="scene", path="s.png", width=96, height=64), pixels)


def params(**over) -> SamParams:
    return SamParams(backend="sam_transformers", labeller="x", **over)


def test_a_mask_becomes_its_pixel_extent():
    mask = np.zeros((10, 20), dtype=bool)
    mask[2:5, 7:12] = True
    assert mask_box(mask) == (7, 2, 12, 5)
    assert mask_box(np.zeros((4, 4), dtype=bool)) is None


def test_boxes_are_filtered_by_score_and_area_deduplicated_and_capped():
    found = [Instance((0, 0, 50, 50), 0.95), Instance((1, 1, 50, 50), 0.90),    # near duplicate of the first
             Instance((60, 60, 90, 90), 0.92), Instance((0, 0, 2, 2), 0.99),     # too small
             Instance((0, 0, 100, 100), 0.99), Instance((60, 0, 90, 30), 0.5),   # too large; too unsure
             Instance((30, 60, 55, 95), 0.89)]
    kept = select_instances(found, 100, 100, params(pred_iou_thresh=0.8, min_area=0.01, max_area=0.8, nms_iou=0.5))
    assert [k.box for k in kept] == [(0, 0, 50, 50), (60, 60, 90, 90), (30, 60, 55, 95)]
    capped = select_instances(found, 100, 100, params(pred_iou_thresh=0.8, min_area=0.01, max_area=0.8,
                                                      nms_iou=0.5, max_boxes=2))
    assert [k.box for k in capped] == [(0, 0, 50, 50), (60, 60, 90, 90)]


def check_described_objects(facts, vocabulary):
    objects = [f for f in facts if f.kind == "object"]
    regions = [f for f in facts if f.kind == "region"]
    assert objects, "with every threshold open, the tiny model's masks give boxes"
    assert len(objects) <= 3
    for fact in objects:
        assert fact.text in vocabulary
        assert set(fact.attributes) == {"colour", "size"}
        x1, y1, x2, y2 = fact.box
        assert 0 <= x1 < x2 <= 1 and 0 <= y1 < y2 <= 1
    assert [r.box for r in regions] == [o.box for o in objects] and all(r.text for r in regions)


OPEN = {"points_per_side": 3, "pred_iou_thresh": 0.0, "min_area": 0.0, "max_area": 1.0, "nms_iou": 1.0,
        "max_boxes": 3, "attribute_min_score": 0.0, "vocabulary": "VOCAB", "attributes": "ATTRS"}


@pytest.fixture
def vocabularies(tmp_path):
    (tmp_path / "v.txt").write_text("circle\nsquare\ndog\n")
    (tmp_path / "a.yaml").write_text("colour: [red, blue, green]\nsize: [small, large]\n")
    return {"vocabulary": str(tmp_path / "v.txt"), "attributes": str(tmp_path / "a.yaml")}


def test_transformers_sam_boxes_get_labels_attributes_and_region_captions(configure, tmp_path, clip_folder,
                                                                          blip_folder, vocabularies):
    folder = tiny_models.sam_transformers(tmp_path / "sam")
    settings = configure({"extractors": {"sam_test": {
        "backend": "sam_transformers", "model": str(folder), "labeller": str(clip_folder), "points_per_batch": 4,
        "region_captioner": str(blip_folder), **OPEN, **vocabularies}}})
    extractor, = build_extractors(settings, only=["sam_test"])
    extractor.load()
    facts, = extractor.extract([scene()])
    check_described_objects(facts, {"circle", "square", "dog"})


def test_segment_anything_without_torchvision_says_what_to_install(configure, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torchvision", None)  # as on a machine where it is missing
    for name in [n for n in sys.modules if n.startswith("segment_anything")]:
        monkeypatch.delitem(sys.modules, name)
    settings = configure({"extractors": {"sam_test": {"backend": "sam", "checkpoint": str(tmp_path / "x.pth"),
                                                 "labeller": "x"}}})
    extractor, = build_extractors(settings, only=["sam_test"])
    with pytest.raises(ExtractorError) as raised:
        extractor.load()
    message = str(raised.value)
    assert "\n" not in message and "torchvision" in message and "sam_transformers" in message


def test_segment_anything_names_a_missing_checkpoint(configure, tmp_path, monkeypatch):
    tiny_models.provide_torchvision(monkeypatch)
    settings = configure({"extractors": {"sam_test": {"backend": "sam", "checkpoint": str(tmp_path / "sam_vit_h.pth"),
                                                 "labeller": "x"}}})
    extractor, = build_extractors(settings, only=["sam_test"])
    with pytest.raises(ExtractorError, match=r"SAM vit_h checkpoint is not available .*sam_vit_h.pth.*checkpoint"):
        extractor.load()


def test_segment_anything_automatic_masks_become_described_objects(configure, tmp_path, monkeypatch, clip_folder,
                                                                    blip_folder, vocabularies):
    tiny_models.provide_torchvision(monkeypatch)
    from segment_anything import sam_model_registry

    checkpoint = tmp_path / "tiny_sam.pth"
    torch.save(tiny_models.tiny_sam().state_dict(), checkpoint)

    def build_tiny(checkpoint=None):  # registered like vit_b / vit_h: build, then load the checkpoint
        model = tiny_models.tiny_sam()
        model.load_state_dict(torch.load(checkpoint))
        return model

    monkeypatch.setitem(sam_model_registry, "tiny_test", build_tiny)
    settings = configure({"extractors": {"sam_test": {
        "backend": "sam", "checkpoint": str(checkpoint), "model_type": "tiny_test", "stability_score_thresh": 0.0,
        "labeller": str(clip_folder), "region_captioner": str(blip_folder), **OPEN, **vocabularies}}})
    extractor, = build_extractors(settings, only=["sam_test"])
    assert extractor.key.startswith("sam:sam-tiny_test:")
    extractor.load()
    facts, = extractor.extract([scene()])
    check_described_objects(facts, {"circle", "square", "dog"})
