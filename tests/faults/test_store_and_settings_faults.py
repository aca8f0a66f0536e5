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
    (tmp_path / "no_images").mkdir()
    result = run_cli("ingest", "no_images", cwd=tmp_path, env={"BENCHSMITH_WORKSPACE": str(tmp_path / "ws"),
                                                                "BENCHSMITH_DB_URL": f"sqlite:///{path}"})
    assert result.returncode == 0, result.stderr
    assert path.read_bytes().startswith(b"SQLite format 3")


READ_ONLY_COMMANDS = [["status"], ["stats"], ["report"], ["review", "status"], ["review", "annotators", "list"],
                      ["eval", "board"], ["eval", "items"]]


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS, ids=" ".join)
def test_a_read_only_command_on_a_store_that_is_not_there_says_where_it_looked_and_creates_nothing(tmp_path, command):
    line = one_line_error(run_cli("--workspace", "mistyped", *command, cwd=tmp_path))
    assert f"there is no benchsmith store at {tmp_path / 'mistyped' / 'benchsmith.db'}" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["status"], ["ingest", "no_images"]], ids=" ".join)
def test_another_applications_database_is_refused_without_being_touched(tmp_path, command):
    path = other_app(tmp_path)
    (tmp_path / "no_images").mkdir()
    before = path.read_bytes()
    line = one_line_error(run_cli(*command, cwd=tmp_path, env={"BENCHSMITH_DB_URL": f"sqlite:///{path}"}))
    assert "no benchsmith schema version" in line
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["no_images", "other.sqlite"]


def test_a_store_with_a_table_overwritten_is_refused_with_the_restore_advice(tmp_path):
    path = tmp_path / "bench" / "benchsmith.db"
    assert run_cli("scenes", "make", "--n", "3", "--out", "scenes", cwd=tmp_path).returncode == 0
    assert run_cli("ingest", "scenes/manifest.jsonl", cwd=tmp_path).returncode == 0
    assert run_cli("extract", cwd=tmp_path).returncode == 0
    with sqlite3.connect(path) as conn:  # fold the log into the file, then write garbage over the facts' root page
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'facts'").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as handle:
        handle.seek((root - 1) * size)
        handle.write(b"\xab" * size)
    line = one_line_error(run_cli("generate", cwd=tmp_path))
    assert "is damaged" in line and "restore it from your last backup" in line


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
