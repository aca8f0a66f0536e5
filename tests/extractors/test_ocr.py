from collections import Counter

import pytest

from benchsmith.images import open_rgb
from extractors.base import Loaded, build_extractors
from extractors.ocr import wheel_model_folders


@pytest.fixture(scope="module")
def scenes_loaded(few_scenes):
    """The oracle scenes as (Loaded, truth) pairs, straight from their manifest."""
    import json

    from benchsmith.records import Image

    rows = [json.loads(line) for line in few_scenes.read_text().splitlines()]
    return [(Loaded(Image(id=f"scene{i}", path=row["path"], width=640, height=480),
                    open_rgb(few_scenes.parent / row["path"])), row) for i, row in enumerate(rows)]


def check_reads_the_signs(extractor, scenes_loaded):
    facts = extractor.extract([loaded for loaded, _ in scenes_loaded])
    assert len(facts) == len(scenes_loaded)
    for found, (loaded, row) in zip(facts, scenes_loaded):
        assert Counter(f.text for f in found) == Counter(row["truth"]["words"])
        for fact in found:
            truth = next(line for line in row["ocr"] if line["text"] == fact.text)
            x1, y1, x2, y2 = truth["box"]
            cx = sum(x for x, _ in fact.quad) / 4
            cy = sum(y for _, y in fact.quad) / 4
            assert x1 < cx < x2 and y1 < cy < y2, "the quad sits on the rendered line"
            assert fact.kind == "ocr" and 0.5 <= fact.score <= 1 and fact.item_id == loaded.image.id


def test_rapidocr_reads_every_sign_word_where_it_was_drawn(configure, scenes_loaded):
    extractor, = build_extractors(configure({}), only=["rapidocr"])
    extractor.load()
    check_reads_the_signs(extractor, scenes_loaded)
    assert extractor.key.startswith("rapidocr:rapidocr-3.")


def test_rapidocr_reads_the_same_with_images_side_by_side_and_one_at_a_time(configure, scenes_loaded):
    loaded = [image for image, _ in scenes_loaded]
    found = {}
    for parallel in (1, 3):
        extractor, = build_extractors(configure({"extractors": {"rapidocr": {"parallel": parallel}}}), only=["rapidocr"])
        extractor.load()
        assert extractor.parallel == min(parallel, extractor.batch_size)
        found[parallel] = (extractor.key, [[(f.text, f.quad, f.score) for f in facts]
                                           for facts in extractor.extract(loaded)])
    assert found[1] == found[3]  # the same lines, corners and scores, and the same key: a speed setting
    assert sum(map(len, found[1][1])) >= len(loaded)


def test_paddleocr_reads_every_sign_word_with_local_model_folders(configure, scenes_loaded, tmp_path, monkeypatch):
    monkeypatch.setenv("PADDLE_PDX_CACHE_HOME", str(tmp_path / "paddlex"))
    det, rec = wheel_model_folders(tmp_path / "models")
    settings = configure({"extractors": {"paddle": {
        "backend": "paddleocr", "det_model_name": "PP-OCRv4_mobile_det", "det_model_dir": str(det),
        "rec_model_name": "PP-OCRv4_mobile_rec", "rec_model_dir": str(rec), "device": "cpu"}}})
    extractor, = build_extractors(settings, only=["paddle"])
    extractor.load()
    check_reads_the_signs(extractor, scenes_loaded)
    assert extractor.provenance.model == "PP-OCRv4_mobile_det+PP-OCRv4_mobile_rec"


def test_paddleocr_refuses_a_model_folder_without_inference_yml(configure, tmp_path):
    from extractors.base import ExtractorError

    settings = configure({"extractors": {"paddle": {"backend": "paddleocr", "det_model_dir": str(tmp_path)}}})
    extractor, = build_extractors(settings, only=["paddle"])
    with pytest.raises(ExtractorError, match="no inference.yml"):
        extractor.load()


def test_rapidocr_keeps_no_drawn_shape_as_text(configure, tmp_path):
    """RapidOCR reads some of the oracle's squares as "■" or "□" (seed 0: scenes 9, 11 and 13, one with a
    "￥" too); a line with no letter or digit of any script is not text, so never an option of a text question."""
    import json

    from benchsmith.records import Image
    from ingest.scenes import make_scenes

    manifest = make_scenes(tmp_path / "scenes", 14, seed=0)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    loaded = [Loaded(Image(id=f"scene{i}", path=rows[i]["path"], width=640, height=480),
                     open_rgb(manifest.parent / rows[i]["path"])) for i in (9, 11, 13)]
    extractor, = build_extractors(configure({}), only=["rapidocr"])
    extractor.load()
    read = [fact.text for facts in extractor.extract(loaded) for fact in facts]
    assert read and not [text for text in read if not any(char.isalnum() for char in text)], read
    words = {word for i in (9, 11, 13) for word in rows[i]["truth"]["words"]}
    assert words <= set(read)  # the signs themselves are still read
