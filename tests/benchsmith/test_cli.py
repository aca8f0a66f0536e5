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


def test_user_errors_are_one_clear_line_and_exit_code_2(tmp_path):
    missing = run("ingest", "nowhere", cwd=tmp_path)
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "benchsmith.yaml").write_text("generate:\n  openai_api_key: sk-1\n")
    secret = run("status", cwd=tmp_path)
    assert secret.returncode == 2 and "secrets come only from the environment" in secret.stderr
    unreachable = run("status", cwd=tmp_path / "..", env={"BENCHSMITH_DB_URL": "postgresql+psycopg://x@127.0.0.1:1/x"})
    assert unreachable.returncode == 2 and "cannot open the store" in unreachable.stderr


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
