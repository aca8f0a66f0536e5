import pytest

from benchsmith.models import ModelError
from extractors.base import ExtractorError, build_extractors
from extractors.run import extract

LOCAL = {}  # the packaged `local` profile: supplied annotations and RapidOCR


def test_local_extractors_write_supplied_facts_and_real_ocr(store, configure, ingested):
    settings = configure(LOCAL)
    reports = extract(store, settings)
    assert {name: (r.pending, r.done, r.failed) for name, r in reports.items()} == {
        "supplied": (6, 6, 0), "rapidocr": (6, 6, 0)}
    facts = store.get_facts([i.id for i in ingested])
    for image in ingested:
        mine = facts[image.id]
        objects = [f for f in mine if f.kind == "object"]
        assert [(o.text, o.attributes["colour"]) for o in objects] == [
            (o["label"], o["attributes"]["colour"]) for o in image.annotations["objects"]]
        for backend in ("rapidocr", "supplied"):
            read = sorted(f.text for f in mine if f.kind == "ocr" and f.provenance.backend == backend)
            assert read == sorted(image.annotations["truth"]["words"]), backend
        assert all(f.provenance.model.startswith("rapidocr-") for f in mine if f.provenance.backend == "rapidocr")


def test_supplied_text_becomes_text_questions_once_though_rapidocr_reads_it_too(store, configure, ingested):
    from generators.stage import run_generate

    settings = configure(LOCAL)
    extract(store, settings)
    run_generate(store, settings, generators=["programmatic"])
    asked = [q for q in store.get_questions() if q.meta["template"] == "text" and "dropped" not in q.meta]
    assert asked
    for image in ingested:
        keys = [q.options[q.answer] for q in asked if q.item_id == image.id]
        assert len(keys) == len(set(keys)) and set(keys) <= set(image.annotations["truth"]["words"])


def test_on_the_default_settings_a_manifests_ocr_becomes_text_questions(store, settings, tmp_path):
    """Blank images: RapidOCR reads nothing, so every text question comes from the manifest's `ocr`."""
    import json

    from PIL import Image as PILImage

    from generators.stage import run_generate
    from ingest.stage import ingest_sources

    words = ["BAKERY", "GARDEN", "MUSEUM", "STATION"]
    rows = []
    for index, word in enumerate(words):
        PILImage.new("RGB", (96, 64), (255, 255, 250 - index)).save(tmp_path / f"{word}.png")
        rows.append({"path": f"{word}.png", "ocr": [{"text": word, "box": [0.2, 0.3, 0.8, 0.5]}]})
    (tmp_path / "manifest.jsonl").write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    ingest_sources(store, settings, [tmp_path / "manifest.jsonl"])
    extract(store, settings)
    run_generate(store, settings, generators=["programmatic"])
    supplied = {item.id: item.annotations["ocr"][0]["text"] for item in store.get_items(kind="image")}
    asked = sorted((supplied[q.item_id], q.options[q.answer]) for q in store.get_questions()
                   if q.meta["template"] == "text")
    assert asked == [(word, word) for word in words]


def test_a_second_run_finds_nothing_pending_and_loads_no_model(store, configure, ingested):
    extract(store, configure(LOCAL))
    # Device does not change the output, so it is not part of the key; a device that cannot exist would
    # fail at load time, which proves that the rerun never loads the model.
    rerun = configure({"extractors": {"rapidocr": {"device": "cuda:99", "batch_size": 1}}})
    with pytest.raises(ExtractorError, match="cuda:99"):
        build_extractors(rerun, only=["rapidocr"])[0].load()
    reports = extract(store, rerun)
    assert [(r.pending, r.done) for r in reports.values()] == [(0, 0), (0, 0)]


def test_every_backend_leaves_batch_size_and_device_out_of_its_key():
    from benchsmith import plugins

    for name in plugins.names("extractors"):
        fields = plugins.load("extractors", name).Params.model_fields
        assert all((fields[f].json_schema_extra or {}).get("unkeyed") for f in ("batch_size", "device")), name


def test_a_changed_parameter_is_new_work_and_keeps_the_old_facts(store, configure, ingested):
    first = extract(store, configure(LOCAL))["supplied"]
    only_captions = configure({"extractors": {"captions": {"backend": "supplied", "kinds": ["captions"]}}})
    second = extract(store, only_captions, only=["captions"])["captions"]
    assert second.config_key != first.config_key and second.done == 6
    counts = store.extraction_counts()
    assert counts[(first.config_key, "done")] == counts[(second.config_key, "done")] == 6


def test_an_unreadable_image_is_recorded_as_failed_and_the_run_goes_on(store, configure, ingested):
    settings = configure(LOCAL)
    broken = ingested[0]
    original = (settings.media_dir / broken.path).read_bytes()
    (settings.media_dir / broken.path).write_bytes(b"not a png any more")
    reports = extract(store, settings, only=["rapidocr"])
    assert (reports["rapidocr"].done, reports["rapidocr"].failed) == (5, 1)
    failure, = store.extraction_failures()
    assert failure["item_id"] == broken.id and failure["status"] == "failed"
    assert "image cannot be read" in failure["reason"]
    # failures are not retried unless asked; once the file is back, a retry succeeds
    assert extract(store, settings, only=["rapidocr"])["rapidocr"].pending == 0
    (settings.media_dir / broken.path).write_bytes(original)
    retried = extract(store, settings, only=["rapidocr"], retry_failed=True)["rapidocr"]
    assert (retried.pending, retried.done, retried.failed) == (1, 1, 0)
    assert store.extraction_failures() == []


def test_unknown_extractor_names_and_backends_are_clear_settings_errors(configure):
    from benchsmith.errors import BenchsmithError
    from benchsmith.settings import SettingsError

    with pytest.raises(SettingsError, match="no extractor named 'blip'"):
        build_extractors(configure({}), only=["blip"])
    with pytest.raises(BenchsmithError, match="'tesseract' is not one of the installed extractors"):
        configure({"extractors": {"x": {"backend": "tesseract"}}})
    with pytest.raises(SettingsError, match=r"extract: extractors.x.min_score"):
        configure({"extractors": {"x": {"backend": "rapidocr", "min_score": 3}}})


def test_missing_weights_name_the_model_and_leave_the_store_untouched(store, configure, ingested):
    settings = configure({"extractors": {"blip2": {"backend": "caption", "model": "Salesforce/blip2-opt-2.7b"}}})
    with pytest.raises(ModelError) as raised:
        extract(store, settings, only=["blip2"])
    message = str(raised.value)
    assert "Salesforce/blip2-opt-2.7b" in message and "extract.extractors.blip2.model" in message
    assert store.extraction_counts() == {}


def test_a_backend_failing_on_one_image_fails_that_image_only(store, configure, ingested):
    from benchsmith.records import Image

    # A row written by an older version, with a box the Fact record refuses: the backend raises on it.
    legacy = Image(id="legacy", path=ingested[0].path, width=640, height=480,
                   annotations={"objects": [{"label": "cup", "box": [0.9, 0.1, 0.2, 0.5]}]})
    store.add_items([legacy])
    report = extract(store, configure({}), only=["supplied"])["supplied"]
    assert (report.pending, report.done, report.failed) == (7, 6, 1)
    failure, = store.extraction_failures()
    assert failure["item_id"] == "legacy" and failure["reason"].startswith("ValidationError")
    assert store.get_facts(["legacy"])["legacy"] == []


def test_a_missing_model_stops_the_run_before_any_extractor_writes(store, configure, ingested, tmp_path):
    # supplied would run first and could work, but the captioner's folder is missing: nothing may run
    settings = configure({"extractors": {"cap": {"backend": "caption", "model": str(tmp_path / "blip-large")}}})
    with pytest.raises(ModelError, match=r"model folder .*blip-large does not exist \(extract.extractors.cap"):
        extract(store, settings, only=["supplied", "cap"])
    assert store.extraction_counts() == {}


def test_offline_an_uncached_hub_model_is_named_with_the_setting_to_change(configure, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    settings = configure({"extractors": {"sam_test": {"backend": "sam_transformers", "model": "facebook/sam-vit-huge",
                                                      "labeller": "openai/clip-vit-large-patch14"}}})
    extractor, = build_extractors(settings, only=["sam_test"])
    with pytest.raises(ModelError, match=r"facebook/sam-vit-huge .*extract.extractors.sam_test.model "
                                             r".*unset HF_HUB_OFFLINE"):
        extractor.check()


def test_every_registered_backend_is_a_backend_class_with_its_parameters():
    from benchsmith import plugins
    from extractors.base import Backend, BackendParams

    assert {"supplied", "rapidocr", "paddleocr", "caption", "florence2", "clip_tags", "sam",
            "sam_transformers"} <= set(plugins.names("extractors"))
    for name in plugins.names("extractors"):
        cls = plugins.load("extractors", name)
        assert issubclass(cls, Backend) and issubclass(cls.Params, BackendParams), name


def test_the_gpu_profile_builds_its_extractors_without_loading_anything(settings):
    from benchsmith.settings import load_settings

    gpu = load_settings(profile="gpu", env={"BENCHSMITH_WORKSPACE": str(settings.workspace)})
    supplied, *built = build_extractors(gpu)
    assert [e.name for e in built] == ["blip2", "florence2", "clip_tags", "sam", "paddleocr"]
    assert all(e.uses_gpu for e in built)
    assert len({e.key for e in built}) == 5
    assert supplied.params.kinds == ["captions", "tags", "ocr"]  # boxes come from the detectors, text from both
