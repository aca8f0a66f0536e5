"""The installed `benchsmith` command, run as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PIL import Image

from ingest.scenes import make_scenes

BENCHSMITH = str(Path(sys.executable).with_name("benchsmith"))


def run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "PREFECT_API"))}
    return subprocess.run([BENCHSMITH, *args], cwd=cwd, env=clean | (env or {}), capture_output=True, text=True,
                          timeout=300)


def test_scenes_ingest_and_status_show_the_oracle_in_the_store(tmp_path):
    made = run("scenes", "make", "--n", "6", "--seed", "2", "--out", "scenes", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    ingested = run("ingest", "scenes/manifest.jsonl", cwd=tmp_path)
    assert ingested.returncode == 0, ingested.stderr
    assert "6 added" in ingested.stdout
    again = run("ingest", "scenes/manifest.jsonl", cwd=tmp_path)
    assert "6 seen, 0 added, 6 unchanged since the last ingest (not read again)" in again.stdout
    status = json.loads(run("status", "--json", cwd=tmp_path).stdout)
    assert status["items"] == {"image/ok": 6}
    assert status["checks"]["richness"] == {"passed": 6}
    assert "image/ok" in run("status", cwd=tmp_path).stdout


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_store_and_media_are_readable_by_their_owner_alone(tmp_path):
    previous = os.umask(0o022)  # a usual login umask: files readable by everyone
    try:
        ingested = run("ingest", str(make_scenes(tmp_path / "scenes", 2, seed=3)), cwd=tmp_path)
    finally:
        os.umask(previous)
    assert ingested.returncode == 0, ingested.stderr
    bench = tmp_path / "bench"
    media = list((bench / "media").rglob("*.*"))
    assert media and {mode(p) for p in media} == {0o600}
    assert mode(bench) == mode(bench / "media") == 0o700 and mode(bench / "benchsmith.db") == 0o600


def test_bad_files_are_summarised_and_the_run_still_succeeds(tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    Image.new("RGB", (64, 64), (9, 9, 9)).save(folder / "good.png")
    (folder / "empty.jpg").write_bytes(b"")
    (folder / "readme.png").write_text("not an image")
    result = run("ingest", "mixed", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "1 added" in result.stdout and "2 refused (1 empty, 1 not_an_image)" in result.stdout
    listed = run("status", "--refused", cwd=tmp_path).stdout
    assert "readme.png" in listed and "not an image Pillow can read" in listed


def test_supplied_boxes_outside_their_image_are_counted_with_their_reason_in_the_summary(tmp_path):
    Image.new("RGB", (64, 48), (9, 9, 9)).save(tmp_path / "a.png")
    row = {"path": "a.png",
           "objects": [{"label": "cup", "box_px": [4, 4, 30, 30]}, {"label": "dog", "bbox": [200, 10, 20, 20]}],
           "ocr": [{"text": "EXIT", "box_px": [70, 50, 90, 60]}]}
    (tmp_path / "coco.jsonl").write_text(json.dumps(row) + "\n")
    result = run("ingest", "coco.jsonl", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert ("1 added, 0 already in the store, 2 supplied boxes dropped (1 object, 1 ocr; each with its reason "
            "under its image's annotations.dropped)") in result.stdout


def test_user_errors_are_one_clear_line_and_exit_code_2(tmp_path):
    missing = run("ingest", "nowhere", cwd=tmp_path)
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "benchsmith.yaml").write_text("generate:\n  openai_api_key: sk-1\n")
    secret = run("status", cwd=tmp_path)
    assert secret.returncode == 2 and "secrets come only from the environment" in secret.stderr
    unreachable = run("status", cwd=tmp_path / "..", env={"BENCHSMITH_DB_URL": "postgresql+psycopg://x@127.0.0.1:1/x"})
    assert unreachable.returncode == 2 and "cannot open the store" in unreachable.stderr


def test_an_unknown_section_is_refused_from_the_environment_as_from_a_settings_file(tmp_path):
    from_env = run("config", "show", cwd=tmp_path, env={"BENCHSMITH__NOPE__X": "1"})
    assert from_env.returncode == 2 and "unknown settings in the environment" in from_env.stderr
    assert "nope" in from_env.stderr
    (tmp_path / "benchsmith.yaml").write_text("nope:\n  x: 1\n")
    from_file = run("config", "show", cwd=tmp_path)
    assert from_file.returncode == 2 and "unknown settings in benchsmith.yaml: nope" in from_file.stderr


def test_config_show_masks_secrets(tmp_path):
    shown = run("config", "show", cwd=tmp_path, env={"OPENAI_API_KEY": "sk-top-secret", "BENCHSMITH_PROFILE": "gpu"})
    assert shown.returncode == 0
    assert "sk-top-secret" not in shown.stdout and "openai_api_key: '****'" in shown.stdout
    assert "profile: gpu" in shown.stdout


def test_every_command_explains_itself(tmp_path):
    for command in (["--help"], ["ingest", "--help"], ["status", "--help"], ["scenes", "make", "--help"],
                    ["config", "show", "--help"], ["build", "--help"]):
        result = run(*command, cwd=tmp_path)
        assert result.returncode == 0 and "Usage" in result.stdout, command


def test_changing_min_nouns_rejudges_exactly_the_images_it_affects(tmp_path):
    from benchsmith.store import Store

    assert run("scenes", "make", "--n", "8", "--seed", "3", "--out", "scenes", cwd=tmp_path).returncode == 0
    assert run("ingest", "scenes/manifest.jsonl", cwd=tmp_path).returncode == 0
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        nouns = {v.subject_id: v.details["nouns"] for v in store.get_verdicts(stage="richness")}
    assert len(nouns) == 8 and len(set(nouns.values())) > 1
    threshold = sorted(nouns.values())[len(nouns) // 2]
    poor = {image for image, n in nouns.items() if n < threshold}
    assert poor

    stricter = run("ingest", "scenes/manifest.jsonl", cwd=tmp_path,
                   env={"BENCHSMITH__INGEST__RICHNESS__MIN_NOUNS": str(threshold)})
    assert stricter.returncode == 0, stricter.stderr
    status = json.loads(run("status", "--json", cwd=tmp_path).stdout)
    assert status["items"] == {"image/ok": 8 - len(poor), "image/excluded": len(poor)}
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        assert {i.id for i in store.get_items(status="excluded")} == poor
        assert {v.subject_id for v in store.get_verdicts(stage="richness", passed=False)} == poor

    back = run("ingest", "scenes/manifest.jsonl", cwd=tmp_path)           # the default again: all readmitted
    assert back.returncode == 0, back.stderr
    assert json.loads(run("status", "--json", cwd=tmp_path).stdout)["items"] == {"image/ok": 8}
