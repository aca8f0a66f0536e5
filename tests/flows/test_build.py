"""The build flow on a real Prefect server: stages run once, and a rerun with nothing new is served from cache."""

from __future__ import annotations

import shutil
from pathlib import Path

from ingest.scenes import make_scenes
from benchsmith.store import Store
from tests.annotation.test_pull import scripted  # noqa: F401 - two annotators review a scripted set


def test_build_ingests_then_a_rerun_reuses_every_cached_stage(prefect_api, settings, tmp_path):
    from flows.build import build_flow

    source = make_scenes(tmp_path / "scenes", 5, seed=11)
    first = build_flow(settings, [str(source)])
    ingested = first["ingest"][f"ingest {source}"]
    assert ingested["added"] == 5 and first["ingest"]["richness"]["judged"] == 5
    with Store(settings.db_url) as store:
        assert len(store.get_items()) == 5
        stage_runs_after_first = len(store.get_stage_runs())

    second = build_flow(settings, [str(source)])
    assert all(result == {"cached": True} for stage in ("ingest", "extract", "generate")
               for result in second[stage].values())  # no task ran
    with Store(settings.db_url) as store:
        rerun = [r["stage"] for r in store.get_stage_runs()][stage_runs_after_first:]
    assert rerun == []  # nothing changed: no stage ran
    assert second["filter"] == {"cached": True}
    assert second["report"] == first["report"] | {"cached": True}  # nothing changed: the last report stands


def test_a_new_richness_threshold_rejudges_exactly_the_images_it_changes_then_a_rebuild_runs_nothing(
        prefect_api, settings, tmp_path):
    from benchsmith.settings import load_settings
    from flows.build import build_flow

    source = str(make_scenes(tmp_path / "scenes", 6, seed=15))
    build_flow(settings, [source])
    with Store(settings.db_url) as store:
        verdicts = store.get_verdicts(stage="richness")
    nouns = {v.subject_id: v.details["nouns"] for v in verdicts}
    threshold = max(nouns.values())
    newly_poor = {i for i, n in nouns.items() if n < threshold} - {v.subject_id for v in verdicts if not v.passed}
    assert 0 < len(newly_poor) < len(nouns)

    stricter = load_settings(env={"BENCHSMITH_WORKSPACE": str(settings.workspace),
                                  "BENCHSMITH__INGEST__RICHNESS__MIN_NOUNS": str(threshold),
                                  "BENCHSMITH__INGEST__RICHNESS__MIN_OBJECTS": "0"})  # nouns alone decide
    rerun = build_flow(stricter, [source])
    richness = rerun["ingest"]["richness"]
    assert (richness["judged"], richness["excluded"], richness["readmitted"]) == (len(newly_poor), len(newly_poor), 0)
    assert rerun["extract"]["richness after extract"]["cached"]
    with Store(settings.db_url) as store:
        assert {v.subject_id for v in store.get_verdicts(stage="richness", passed=False)} >= newly_poor
        assert not newly_poor & {i.id for i in store.get_items()}
        runs = len(store.get_stage_runs())

    build_flow(stricter, [source])
    with Store(settings.db_url) as store:
        assert len(store.get_stage_runs()) == runs  # nothing changed since: no stage ran


def test_scenes_are_rendered_once_per_count_and_seed(prefect_api, settings):
    from flows.build import build_flow

    first = build_flow(settings, [], scenes=2, scenes_seed=4)
    manifest = first["scenes"]["manifest"]
    assert first["ingest"][f"ingest {manifest}"]["added"] == 2
    again = build_flow(settings, [], scenes=2, scenes_seed=4)
    assert again["scenes"] == {"manifest": manifest, "cached": True}  # not rendered again: nothing to ingest
    assert again["ingest"][f"ingest {manifest}"] == {"cached": True}
    shutil.rmtree(Path(manifest).parent)  # a maintainer clears the workspace's scenes
    redrawn = build_flow(settings, [], scenes=2, scenes_seed=4)
    assert "cached" not in redrawn["scenes"] and Path(manifest).is_file()
    assert redrawn["ingest"][f"ingest {manifest}"]["added"] == 0  # the same scenes: nothing new


def test_a_changed_source_runs_its_stage_again(prefect_api, settings, tmp_path):
    from flows.build import build_flow

    source = make_scenes(tmp_path / "scenes", 3, seed=12)
    build_flow(settings, [str(source)])
    grown = make_scenes(tmp_path / "scenes", 4, seed=12)  # same folder, one more scene
    result = build_flow(settings, [str(grown)])
    assert result["ingest"][f"ingest {grown}"]["added"] == 1


def test_build_ingests_with_the_same_options_as_the_ingest_command(prefect_api, settings, tmp_path):
    from flows.build import build_flow

    scenes = make_scenes(tmp_path / "scenes", 2, seed=14).parent
    folder = tmp_path / "photos"
    folder.mkdir()
    for png in scenes.glob("*.png"):
        (folder / png.name).write_bytes(png.read_bytes())
    build_flow(settings, [str(folder)], ingest_options={"source": "museum-2026", "license": "CC-BY-4.0",
                                                         "workers": 2})
    with Store(settings.db_url) as store:
        assert {(i.source, i.license) for i in store.get_items()} == {("museum-2026", "CC-BY-4.0")}
    again = build_flow(settings, [str(folder)], ingest_options={"source": "museum-2027", "license": "CC-BY-4.0"})
    assert again["ingest"][f"ingest {folder}"]["cached"]  # the same bytes: nothing to read again, ids unchanged


def test_the_stage_logic_runs_without_prefect(settings, tmp_path):
    from ingest.sources import candidates_for
    from ingest.stage import ingest

    source = make_scenes(tmp_path / "scenes", 2, seed=13)
    with Store(settings.db_url) as store:
        report = ingest(store, settings.media_dir, candidates_for(source), settings.ingest, label="x")
    assert report.added == 2


def test_finish_pulls_the_reviews_publishes_the_accepted_questions_and_reports(prefect_api, scripted):
    from flows.build import finish_flow

    settings, _store, _questions = scripted
    summary = finish_flow(settings, version="v1")
    review = summary["review"]
    assert (review["accepted"], review["rejected"], review["flagged"], review["waiting"]) == (4, 2, 3, 2)
    published = summary["publish"]["publish"]
    assert published["version"] == "v1" and published["questions"] == 4
    assert (settings.workspace / "releases" / "v1" / "README.md").is_file()
    report = (settings.workspace / "reports" / summary["run"] / "report.md").read_text()
    assert "| published" in report and "review:pull" in report


def test_build_on_a_terminal_shows_each_long_stage_with_counts_and_ends_with_a_table(prefect_api, tmp_path):
    """What a maintainer watching `benchsmith build` sees: a progress line per stage on the terminal (counts,
    time taken and left), then one table, without Python dicts or work-ledger keys."""
    import os
    import pty
    import re
    import subprocess
    import sys
    from pathlib import Path

    scenes = make_scenes(tmp_path / "scenes", 3, seed=21)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "LABEL_STUDIO"))}
    primary, secondary = pty.openpty()
    build = subprocess.Popen([str(Path(sys.executable).with_name("benchsmith")), "build", str(scenes)], cwd=tmp_path,
                             env=env | {"COLUMNS": "150", "TERM": "xterm"}, stdin=secondary, stdout=secondary,
                             stderr=secondary)
    os.close(secondary)
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        seen += chunk
    assert build.wait(timeout=600) == 0, seen.decode(errors="replace")[-3000:]
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace"))  # colours and cursor moves
    for stage in ("ingest", "extract rapidocr", "generate:programmatic", "blind filter"):
        assert stage in shown, shown[-3000:]
    assert "3/3" in shown  # three images through the OCR
    assert "┃ stage" in shown and "extract rapidocr" in shown and "{'" not in shown and "rapidocr:rapidocr" not in shown
