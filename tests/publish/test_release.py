"""A release built from reviewed oracle scenes: it loads offline, per config; lmms-eval and VLMEvalKit
read it by their own rules; it leaks nothing; versions never change a question silently."""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path

import datasets
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from huggingface_hub import DatasetCard
from PIL import Image as PILImage

from benchsmith.dimensions import registry
from publish.media import MediaError
from publish.release import PublishError, publish
from benchsmith.settings import load_settings
from tests.publish.conftest import GPS, SERIAL, accept, build_reviewed, gps_photo

TOKENS = {"OPENAI_API_KEY": "sk-fake-openai-7f3a9c", "HF_TOKEN": "hf_fakeTokenQ8zX2",
          "LABEL_STUDIO_API_KEY": "ls-fake-key-55e1"}


def load(folder: Path, config: str | None, cache: Path) -> datasets.Dataset:
    return datasets.load_dataset(str(folder), config, split="test", cache_dir=str(cache))


def test_the_release_loads_offline_with_one_config_per_dimension_plus_all(reviewed, tmp_path):
    result = publish(reviewed.store, reviewed.settings, "v1.0")

    everything = load(result.folder, None, tmp_path / "cache")
    assert sorted(everything["question_id"]) == sorted(reviewed.accepted_ids)
    assert sorted(load(result.folder, "all", tmp_path / "cache")["question_id"]) == sorted(reviewed.accepted_ids)
    for dimension, ids in reviewed.accepted.items():
        rows = load(result.folder, registry().get(dimension).key, tmp_path / "cache")
        assert sorted(rows["question_id"]) == sorted(ids)
        assert set(rows["question_type_id"]) == {dimension}
        assert set(rows["category"]) == {registry().get(dimension).name}
    assert {q.status for q in reviewed.store.get_questions(ids=sorted(reviewed.accepted_ids))} == {"published"}
    assert {q.status for q in reviewed.store.get_questions(ids=sorted(reviewed.not_accepted))} != {"published"}


def test_a_release_from_a_postgresql_store_is_the_same(store, settings, oracle_dir, tmp_path):
    reviewed = build_reviewed(store, settings, oracle_dir, tmp_path)
    result = publish(store, settings, "v1")
    rows = {r["question_id"]: r for r in load(result.folder, None, tmp_path / "cache")}
    assert set(rows) == reviewed.accepted_ids
    assert rows[reviewed.overruled]["agreement"] == pytest.approx(2 / 3)
    assert [r.version for r in store.get_releases()] == ["v1"] and len(store.release_hashes("v1")) == len(rows)


def test_rows_read_the_way_lmms_eval_seedbench_reads_them(reviewed, tmp_path):
    folder = publish(reviewed.store, reviewed.settings, "v1.0").folder
    for doc in load(folder, None, tmp_path / "cache"):
        visuals = [image.convert("RGB") for image in doc["image"]]              # seed_doc_to_visual
        assert visuals and all(v.size[0] > 0 for v in visuals)
        assert doc["data_type"] in ("image", "video", "image_set")
        prompt = doc["question"] + "".join(f"\n{letter}. {doc['choice_' + letter.lower()]}" for letter in "ABCD")
        assert prompt.count("\n") == 4
        chosen = doc["choice_" + doc["answer"].lower()]                           # answer letter -> option
        assert chosen == reviewed.truth[doc["question_id"]]["right"]
        if doc["question_id"] == reviewed.video_question:
            assert doc["data_type"] == "video"
            assert [v.getpixel((0, 0)) for v in visuals] == [(255, 0, 0), (0, 128, 0), (0, 0, 255)]
        elif doc["question_id"] == reviewed.set_question:                       # image 1, 2, 3 in order
            assert doc["data_type"] == "image_set" and doc["category"] == "Image Comparison"
            assert [v.getpixel((0, 0)) for v in visuals] == [(255, 255, 0), (128, 0, 128), (0, 255, 255)]
        else:
            assert doc["data_type"] == "image" and len(visuals) == 1


def test_annotators_answer_dimension_and_agreement_are_what_gets_published(reviewed, tmp_path):
    rows = {r["question_id"]: r for r in load(publish(reviewed.store, reviewed.settings, "v1").folder, None,
                                              tmp_path / "cache")}
    overruled = rows[reviewed.overruled]
    generator_answer = reviewed.store.get_questions(ids=[reviewed.overruled])[0].answer
    assert overruled["answer"] != "ABCD"[generator_answer]
    assert overruled["agreement"] == pytest.approx(2 / 3) and overruled["annotators"] == 3
    assert rows[reviewed.moved]["question_type_id"] == 2 and rows[reviewed.moved]["category"] == "Instance Identity"
    unreviewed = [r for r in rows.values() if r["annotators"] == 0]
    assert unreviewed and all(r["agreement"] is None for r in unreviewed)
    llm_rows = [r for r in rows.values() if r["generator"] == "llm"]
    assert llm_rows and {r["model"] for r in llm_rows} == {"qwen-7b"}   # a local model path is cut to its name


def vlmevalkit_image_files(tsv_path: Path, img_root: Path) -> dict[str, list[Path]]:
    """Each row's image files as VLMEvalKit's ImageBaseDataset makes them (its __init__ and dump_image,
    followed step by step): a cell of at most 64 characters names the row that holds the image; a
    bracketed cell is a list (its `toliststr` evals it), saved item by item under the names its
    `image_path` lists; one image is saved as `<index>.jpg`."""
    def toliststr(value):
        if isinstance(value, str) and value[0] == "[" and value[-1] == "]":
            return [str(x) for x in eval(value)]  # noqa: S307 - what VLMEvalKit does
        if isinstance(value, str):
            return [value]
        raise NotImplementedError(repr(value))

    def decode_to_file(b64: str, path: Path) -> None:
        image = PILImage.open(io.BytesIO(base64.b64decode(b64)))
        (image.convert("RGB") if image.mode in ("RGBA", "P") else image).save(path)

    data = pd.read_csv(tsv_path, sep="\t")
    data["index"] = [str(x) for x in data["index"]]
    image_map = dict(zip(data["index"], [str(x) for x in data["image"]]))
    for k in image_map:
        if len(image_map[k]) <= 64:
            assert image_map[k] in image_map and len(image_map[image_map[k]]) > 64
            image_map[k] = image_map[image_map[k]]
    data["image"] = [x[0] if len(x) == 1 else x for x in (toliststr(image_map[k]) for k in data["index"])]
    data["image_path"] = [x[0] if len(x) == 1 else x for x in map(toliststr, data["image_path"])]
    img_root.mkdir(parents=True)
    files = {}
    for line in data.to_dict("records"):
        if isinstance(line["image"], list):
            files[line["question_id"]] = [img_root / name for name in line["image_path"]]
            for b64, path in zip(line["image"], files[line["question_id"]]):
                if not path.exists():
                    decode_to_file(b64, path)
        else:
            files[line["question_id"]] = [img_root / f"{line['index']}.jpg"]
            decode_to_file(line["image"], files[line["question_id"]][0])
    return files


def test_vlmevalkit_reads_the_tsv_by_its_own_rules(reviewed, tmp_path):
    folder = publish(reviewed.store, reviewed.settings, "v1").folder
    [tsv_path] = (folder / "vlmevalkit").glob("*.tsv")
    data = pd.read_csv(tsv_path, sep="\t")
    assert {"index", "image", "image_path", "question", "A", "B", "C", "D", "answer", "category"} <= set(data.columns)
    assert data["index"].dtype.kind == "i" and data["index"].is_unique
    files = vlmevalkit_image_files(tsv_path, tmp_path / "LMUData" / "images")
    by_id = {r["question_id"]: r for r in load(folder, None, tmp_path / "cache")}
    assert set(files) == set(by_id)
    for question_id, paths in files.items():
        published = [image.convert("RGB") for image in by_id[question_id]["image"]]
        shown = [PILImage.open(path).convert("RGB") for path in paths]
        assert [image.size for image in shown] == [image.size for image in published]
        if len(paths) > 1:          # saved under their own names and formats: the very pixels
            assert [image.tobytes() for image in shown] == [image.tobytes() for image in published]
    assert [PILImage.open(p).getpixel((0, 0)) for p in files[reviewed.set_question]] == [
        (255, 255, 0), (128, 0, 128), (0, 255, 255)]
    for row in data.itertuples():
        assert row.answer == by_id[row.question_id]["answer"]
        assert getattr(row, row.answer) == reviewed.truth[row.question_id]["right"]
        assert row.category == by_id[row.question_id]["category"]
        assert row.data_type == by_id[row.question_id]["data_type"]


def test_images_are_reencoded_without_exif_and_nothing_local_or_secret_is_in_the_folder(
        oracle_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHSMITH")}
    settings = load_settings(env=env | TOKENS | {"BENCHSMITH_WORKSPACE": str(tmp_path / "bench")})
    from benchsmith.store import Store

    with Store(settings.db_url) as store:
        reviewed = build_reviewed(store, settings, oracle_dir, tmp_path)
        [photo] = store.get_items([reviewed.gps_item])
        stored = settings.media_dir / photo.path
        with PILImage.open(stored) as copy:                                 # ingest already stripped it...
            assert not copy.getexif().get_ifd(0x8825)
        stored.write_bytes((gps_photo(tmp_path / "camera").parent / "holiday.jpg").read_bytes())  # publish must not rely on it
        with PILImage.open(stored) as copy:
            assert copy.getexif().get_ifd(0x8825) and SERIAL.encode() in copy.info["exif"]
        folder = publish(store, settings, "v1").folder

    opened = 0
    for doc in load(folder, None, tmp_path / "cache"):
        for image in doc["image"]:
            exif = image.getexif()
            assert not exif.get_ifd(0x8825) and not exif.get_ifd(0x8769) and len(exif) == 0
            assert "exif" not in image.info and "icc_profile" not in image.info
            opened += 1
    assert opened == len(reviewed.accepted_ids) + 4        # the video and the set show three images each

    forbidden = [str(tmp_path), "/tmp", "/home", "/root", str(Path.home()), *TOKENS.values(), SERIAL,
                 str(GPS[2][0])]
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        blob = path.read_bytes()
        if path.suffix == ".parquet":   # compressed: check the decoded text columns too
            table = pq.read_table(path)
            blob += json.dumps(table.drop(["image"]).to_pylist()).encode()
            for images in table.column("image").to_pylist():
                blob += b"".join(i["bytes"] for i in images) + json.dumps([i["path"] for i in images]).encode()
        for needle in forbidden[:-1]:
            assert needle.encode() not in blob, f"{needle!r} found in {path.relative_to(folder)}"


def test_a_secret_that_slipped_into_a_question_stops_the_release(reviewed, tmp_path):
    env = {"BENCHSMITH_WORKSPACE": str(reviewed.settings.workspace), "HF_TOKEN": "hf_leakyToken999"}
    settings = load_settings(env=env)
    [question] = reviewed.store.get_questions(ids=[reviewed.video_question])
    leaky = question.model_copy(update={"options": ["hf_leakyToken999", *question.options[1:]],
                                        "status": "candidate", "review_answer": None, "review_dimension_id": None})
    reviewed.store.add_questions([leaky], stage="generate")
    accept(reviewed.store, leaky, [0])
    with pytest.raises(PublishError, match="local path or a secret"):
        publish(reviewed.store, settings, "v1")
    assert reviewed.store.get_releases() == []
    assert not (settings.workspace / "releases" / "v1").exists()


def test_a_missing_image_fails_the_release_and_loses_nothing(reviewed):
    [photo] = reviewed.store.get_items([reviewed.gps_item])
    (reviewed.settings.media_dir / photo.path).unlink()
    with pytest.raises(MediaError, match="missing"):
        publish(reviewed.store, reviewed.settings, "v1")
    assert reviewed.store.get_releases() == []
    assert {q.status for q in reviewed.store.get_questions(ids=sorted(reviewed.accepted_ids))} == {"accepted"}
    assert list((reviewed.settings.workspace / "releases").iterdir()) == []   # no release, no half-built one


def test_the_card_describes_the_release_and_shows_its_plots(reviewed):
    folder = publish(reviewed.store, reviewed.settings, "v1").folder
    card = (folder / "README.md").read_text()
    front, body = card.split("---\n")[1], card.split("---\n", 2)[2]
    meta = yaml.safe_load(front)
    hub_card = DatasetCard.load(folder / "README.md")               # as the Hub's client parses it
    assert hub_card.data.license == "cc-by-4.0" and "visual-question-answering" in hub_card.data.task_categories
    assert {"configs", "license", "task_categories", "size_categories", "dataset_info"} <= set(meta)
    assert meta["size_categories"] == ["n<1K"]
    names = {c["config_name"] for c in meta["configs"]}
    assert names == {"all"} | {registry().get(d).key for d in reviewed.accepted}
    for dimension, ids in reviewed.accepted.items():
        assert f"| {dimension} | {registry().get(dimension).name} | {len(ids)} |" in body
    assert "`programmatic`" in body and "`llm (qwen-7b)`" in body
    for plot in ("dimension_counts", "funnel", "answer_balance"):
        assert f"(plots/{plot}.png)" in body
        with PILImage.open(folder / "plots" / f"{plot}.png") as png:
            assert png.format == "PNG" and png.size[0] > 100
    assert f"| published | {len(reviewed.accepted_ids)} |" in body
    assert "First release." in body
    assert "(on single images: 16, on image sets: 1, on videos: 1)" in body


def test_versions_keep_ids_and_list_what_was_added_and_removed(reviewed, tmp_path):
    store, settings = reviewed.store, reviewed.settings
    first = publish(store, settings, "v1")
    v1_rows = {r["question_id"]: r for r in load(first.folder, None, tmp_path / "c1")}

    waiting = [q for q in store.get_questions(status="in_review")]
    store.move("question", [q.id for q in waiting], "accepted", stage="review")
    [photo] = store.get_items([reviewed.gps_item])
    store.set_item_status([photo.id], "excluded")
    removed = {q.id for q in store.get_questions(item_id=photo.id)}
    second = publish(store, settings, "v2")

    assert second.changes.previous == "v1"
    assert set(second.changes.added) == {q.id for q in waiting}
    assert set(second.changes.removed) == removed and second.changes.changed == []
    v2_rows = {r["question_id"]: r for r in load(second.folder, None, tmp_path / "c2")}
    assert set(v2_rows) == (set(v1_rows) - removed) | {q.id for q in waiting}
    for qid in set(v1_rows) & set(v2_rows):
        assert {k: v for k, v in v2_rows[qid].items() if k != "image"} == \
               {k: v for k, v in v1_rows[qid].items() if k != "image"}
    changelog = (second.folder / "CHANGELOG.md").read_text()
    assert "## v2" in changelog and "## v1" in changelog
    assert all(f"`{qid}`" in changelog for qid in second.changes.added + second.changes.removed)
    manifest = json.loads((second.folder / "release.json").read_text())
    assert manifest["previous"] == "v1" and set(manifest["questions"]) == set(v2_rows)
    assert [r.version for r in store.get_releases()] == ["v1", "v2"]


def test_a_withdrawn_question_stays_out_of_later_versions(reviewed, tmp_path):
    store, settings = reviewed.store, reviewed.settings
    publish(store, settings, "v1")
    with pytest.raises(PublishError, match="cannot withdraw nope"):
        publish(store, settings, "v2", withdraw=["nope"])
    second = publish(store, settings, "v2", withdraw=[reviewed.overruled])
    assert second.changes.removed == [reviewed.overruled] and second.changes.added == []
    assert publish(store, settings, "v2").n_questions == second.n_questions     # a rebuild keeps its withdrawals
    store.move("question", [q.id for q in store.get_questions(status="in_review")], "accepted", stage="review")
    third = publish(store, settings, "v3")
    assert reviewed.overruled not in {r["question_id"] for r in load(third.folder, None, tmp_path / "c3")}
    assert third.changes.removed == [] and len(third.changes.added) > 0


def test_a_published_question_never_changes_silently(reviewed):
    store, settings = reviewed.store, reviewed.settings
    publish(store, settings, "v1")
    store.update_reviewed("question", {reviewed.moved: {"review_answer": 3}})
    with pytest.raises(PublishError, match="changed since"):
        publish(store, settings, "v2")
    assert [r.version for r in store.get_releases()] == ["v1"]
    result = publish(store, settings, "v2", allow_changes=True)
    assert result.changes.changed == [reviewed.moved]
    assert "### Changed (1)" in (result.folder / "CHANGELOG.md").read_text()


def test_republishing_a_version_rebuilds_it_only_with_the_same_questions(reviewed):
    store, settings = reviewed.store, reviewed.settings
    first = publish(store, settings, "v1")
    (first.folder / "README.md").unlink()
    again = publish(store, settings, "v1")
    assert (again.folder / "README.md").is_file() and len(store.get_releases()) == 1
    store.move("question", [q.id for q in store.get_questions(status="in_review")], "accepted", stage="review")
    with pytest.raises(PublishError, match="already published with different content"):
        publish(store, settings, "v1")


@pytest.mark.parametrize("version", ["", "../up", "v 1", "-v1", "x" * 65])
def test_a_bad_version_name_is_refused(reviewed, version):
    with pytest.raises(PublishError, match="version"):
        publish(reviewed.store, reviewed.settings, version)


def test_nothing_accepted_means_nothing_to_publish(store, settings):
    with pytest.raises(PublishError, match="no accepted questions"):
        publish(store, settings, "v1")


def test_loading_a_release_warns_about_nothing(reviewed, tmp_path):
    """`datasets` logs through its own `datasets` logger (not propagated) and may also warn."""
    import logging
    import warnings

    folder = publish(reviewed.store, reviewed.settings, "v1.0").folder
    logged: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = logged.append
    datasets_logger = logging.getLogger("datasets")
    datasets_logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            rows = load(folder, None, tmp_path / "cache")
            some_config = registry().get(next(iter(reviewed.accepted))).key
            load(folder, some_config, tmp_path / "cache")
    finally:
        datasets_logger.removeHandler(handler)
    assert len(rows) == len(reviewed.accepted_ids)
    assert [r.getMessage() for r in logged] == [] and [str(w.message) for w in warned] == []
    card = yaml.safe_load((folder / "README.md").read_text().split("---")[1])
    sizes = {info["config_name"]: info["splits"][0] for info in card["dataset_info"]}
    assert sizes["all"]["num_examples"] == len(rows) and sizes["all"]["num_bytes"] > 0


def test_the_card_shows_blind_accuracy_per_solver_and_dimension_with_intervals(reviewed):
    from filters.blind import BlindSettings, judge_questions, solvers_from

    questions = reviewed.store.get_questions(status="accepted")
    config = BlindSettings(rule="mmstar", max_right=0, solvers=[{"kind": "longest", "name": "longest"}])
    verdicts = judge_questions(questions, solvers_from(config), config)
    reviewed.store.add_verdicts(verdicts)
    card = (publish(reviewed.store, reviewed.settings, "v1").folder / "README.md").read_text()
    assert "| dimension | solver | chance | questions before | accuracy before (95% CI) |" in card
    for dimension in {v.details["dimension_id"] for v in verdicts}:
        mine = [v for v in verdicts if v.details["dimension_id"] == dimension]
        kept = [v for v in mine if v.passed]

        def cell(vs) -> str:  # the share of option orders answered right, and its Wilson 95% interval
            n, p, z = len(vs), sum(v.details["solvers"]["longest"]["right"] for v in vs) / len(vs), 1.96
            centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
            return f"{p:.1%} ({max(0, centre - half):.1%}–{min(1, centre + half):.1%})"
        after = cell(kept) if kept else ""
        row = f"| {registry().get(dimension).name} | longest | 25% | {len(mine)} | {cell(mine)} | {len(kept)} | {after} |"
        assert row in card, row
