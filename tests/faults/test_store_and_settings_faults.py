"""Bad store URLs and files, and settings that hold secrets or malformed names: one-line errors with what to do."""

from __future__ import annotations

import sqlite3

import pytest

from benchsmith.records import Image
from benchsmith.settings import SettingsError, load_settings
from benchsmith.store import Store
from tests.faults.conftest import run_cli


def one_line_error(result) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    return lines[0]


@pytest.mark.parametrize(("make", "expected"), [
    (lambda d: "not a url at all", "sqlite:///path/to/benchsmith.db"),
    (lambda d: "mysql://user:pw@127.0.0.1:1/bench", "must be SQLite or PostgreSQL, not mysql"),
    (lambda d: f"sqlite:///{jpeg(d)}", "is not an SQLite database"),
    (lambda d: f"sqlite:///{other_app(d)}", "no benchsmith schema version"),
    (lambda d: f"sqlite:///{d}", "is a folder"),
    (lambda d: f"sqlite:///{truncated_store(d)}", "restore it from your last backup"),
], ids=["garbage", "mysql", "jpeg", "other-app", "folder", "truncated"])
def test_a_store_url_that_names_no_store_is_a_one_line_error(tmp_path, make, expected):
    url = make(tmp_path)
    line = one_line_error(run_cli("status", cwd=tmp_path, env={"BENCHSMITH_WORKSPACE": str(tmp_path / "ws"),
                                                               "BENCHSMITH_DB_URL": url}))
    assert expected in line and "pw@" not in line


@pytest.mark.parametrize("make", [lambda d: (d / "empty.db").touch() or d / "empty.db", lambda d: d / "new" / "s.db"],
                         ids=["zero-bytes", "missing-path"])
def test_an_empty_or_missing_store_file_becomes_a_new_store(tmp_path, make):
    path = make(tmp_path)
    result = run_cli("status", cwd=tmp_path, env={"BENCHSMITH_WORKSPACE": str(tmp_path / "ws"),
                                                  "BENCHSMITH_DB_URL": f"sqlite:///{path}"})
    assert result.returncode == 0, result.stderr
    assert path.read_bytes().startswith(b"SQLite format 3")


def jpeg(folder):
    path = folder / "photo.jpg"
    path.write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 4000)
    return path


def other_app(folder):
    path = folder / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("create table contacts (name text)")
    return path


def truncated_store(folder):
    path = folder / "bench.db"
    with Store(f"sqlite:///{path}") as store:
        store.add_items([Image(id=f"{i:064x}", path=f"{i}.png", width=64, height=64, original_name="x" * 3000)
                         for i in range(300)])
    with sqlite3.connect(path) as conn:  # fold the write-ahead log into the file, then cut the file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return path


@pytest.mark.parametrize("text", ["generate:\n  llm:\n    api_key: sk-live-0123456789abcdefghij\n",
                                  "services:\n  openai_base_url: http://x\n  label_studio_token: abc\n",
                                  "generate:\n  llm:\n    model: sk-proj-0123456789abcdefghijklmn\n"])
def test_a_secret_in_the_settings_file_under_any_name_is_refused(tmp_path, text):
    path = tmp_path / "benchsmith.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError) as raised:
        load_settings(path, env={"BENCHSMITH_WORKSPACE": str(tmp_path)})
    message = str(raised.value)
    assert "secrets come only from the environment" in message and "\n" not in message
    assert "0123456789abcdef" not in message


@pytest.mark.parametrize("name", ["BENCHSMITH__", "BENCHSMITH__INGEST____MIN_SIDE", "BENCHSMITH__INGEST__MIN-SIDE",
                                  "BENCHSMITH__INGEST__"])
def test_malformed_environment_names_are_one_line_errors(tmp_path, name):
    with pytest.raises(SettingsError) as raised:
        load_settings(env={"BENCHSMITH_WORKSPACE": str(tmp_path), name: "3"})
    assert repr(name) in str(raised.value) and "SECTION__KEY" in str(raised.value)


def test_an_environment_name_nested_inside_a_value_set_by_another_is_a_one_line_error(tmp_path):
    with pytest.raises(SettingsError) as raised:
        load_settings(env={"BENCHSMITH_WORKSPACE": str(tmp_path), "BENCHSMITH__INGEST__MIN_SIDE": "3",
                           "BENCHSMITH__INGEST__MIN_SIDE__X": "4"})
    assert "unset one of the two" in str(raised.value)
