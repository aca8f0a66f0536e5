from ingest.annotations import normalise_annotations
from benchsmith.records import Image
from extractors.base import Loaded, build_extractors


def image_with(annotations):
    return Image(id="img", path="x.png", width=200, height=100,
                 annotations=normalise_annotations(annotations, 200, 100))


COCO_STYLE = {
    "captions": ["A dog on a red sofa."],
    "tags": ["dog", "sofa"],
    "objects": [{"label": "dog", "bbox": [20, 10, 60, 40], "attributes": {"colour": "brown"}},
                {"label": "sofa", "box_px": [0, 30, 200, 100], "score": 0.8}],
    "ocr": [{"text": "SALE", "box_px": [100, 0, 140, 20]}],
}


def test_supplied_annotations_become_facts_in_unit_coordinates(configure):
    extractor, = build_extractors(configure({"extractors": {"all": {"backend": "supplied"}}}), only=["all"])
    facts, = extractor.extract([Loaded(image_with(COCO_STYLE), None)])
    by_kind = {}
    for fact in facts:
        by_kind.setdefault(fact.kind, []).append(fact)
    assert [f.text for f in by_kind["caption"]] == ["A dog on a red sofa."]
    assert [f.text for f in by_kind["tag"]] == ["dog", "sofa"]
    dog, sofa = by_kind["object"]
    assert dog.box == (0.1, 0.1, 0.4, 0.5) and dog.attributes == {"colour": "brown"}
    assert sofa.box == (0.0, 0.3, 1.0, 1.0) and sofa.score == 0.8
    sale, = by_kind["ocr"]
    assert sale.quad == ((0.5, 0.0), (0.7, 0.0), (0.7, 0.2), (0.5, 0.2))
    assert {f.provenance.backend for f in facts} == {"supplied"}


def test_the_local_profile_takes_every_supplied_annotation_and_reads_text_too(settings):
    supplied, rapidocr = build_extractors(settings)
    assert (supplied.name, rapidocr.name) == ("supplied", "rapidocr")
    facts, = supplied.extract([Loaded(image_with(COCO_STYLE), None)])
    assert sorted({f.kind for f in facts}) == ["caption", "object", "ocr", "tag"]


def test_boxes_wholly_outside_the_image_are_dropped_with_a_reason_and_never_become_facts(configure):
    """Clipping a box that lies past the edges leaves a zero-area point: no fact, and no question, may
    come from it. Boxes partly inside are clipped and kept."""
    annotations = {"objects": [{"label": "cat", "box_px": [250, 120, 300, 180]},     # past the right/bottom
                               {"label": "kite", "bbox": [-80, -40, 50, 30]},         # COCO box above-left
                               {"label": "pole", "box_px": [200, 0, 260, 100]},       # on the right edge only
                               {"label": "dog", "box_px": [150, 50, 260, 140]}],      # partly inside: clipped
                   "ocr": [{"text": "EXIT", "box_px": [-30, -20, -5, -1]}]}
    image = image_with(annotations)
    assert [o["label"] for o in image.annotations["objects"]] == ["dog"]
    assert image.annotations["objects"][0]["box"] == [0.75, 0.5, 1.0, 1.0]
    dropped = image.annotations["dropped"]
    assert [d.get("label") or d.get("text") for d in dropped] == ["cat", "kite", "pole", "EXIT"]
    assert all("no area inside the 200x100 image" in d["reason"] for d in dropped)
    extractor, = build_extractors(configure({"extractors": {"all": {"backend": "supplied"}}}), only=["all"])
    facts, = extractor.extract([Loaded(image, None)])
    assert [(f.kind, f.text) for f in facts] == [("object", "dog")]


def test_a_crowd_region_in_a_manifest_stays_a_crowd_object_and_its_fact_says_so(configure):
    """COCO's iscrowd: a region of many people is truth that people are there, never one countable person."""
    image = image_with({"objects": [{"label": "person", "bbox": [0, 0, 120, 60], "crowd": True},
                                    {"label": "person", "bbox": [130, 10, 30, 60]}]})
    crowd, one = image.annotations["objects"]
    assert crowd["crowd"] is True and "crowd" not in one  # marked only when set
    extractor, = build_extractors(configure({"extractors": {"all": {"backend": "supplied"}}}), only=["all"])
    facts, = extractor.extract([Loaded(image, None)])
    assert [(f.text, f.attributes) for f in facts] == [("person", {"crowd": "true"}), ("person", {})]
