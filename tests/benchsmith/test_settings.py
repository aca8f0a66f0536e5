"""Effective settings: defaults, file, profile, environment; secrets only from the environment."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from benchsmith.settings import UNKEYED, SettingsError, keyed, load_settings


def write(path, text):
    path.write_text(text)
    return path


def test_defaults_give_the_offline_profile_and_a_sqlite_store_in_the_workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings(env={})
    assert settings.profile == "local"
    assert settings.db_url == f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}"
    assert settings.media_dir == tmp_path / "bench" / "media"


def test_file_then_profile_then_environment_win_in_that_order(tmp_path):
    path = write(tmp_path / "s.yaml", "ingest:\n  min_side: 50\n  batch_size: 7\n"
                                      "profiles:\n  gpu:\n    ingest:\n      min_side: 300\n")
    assert load_settings(path, env={}).ingest.min_side == 50
    assert load_settings(path, profile="gpu", env={}).ingest.min_side == 300
    env = {"BENCHSMITH_PROFILE": "gpu", "BENCHSMITH__INGEST__MIN_SIDE": "400"}
    settings = load_settings(path, env=env)
    assert (settings.profile, settings.ingest.min_side, settings.ingest.batch_size) == ("gpu", 400, 7)


def test_named_environment_variables_override_services_and_store():
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "BENCHSMITH_DB_URL": "postgresql+psycopg://u@h/db",
           "LABEL_STUDIO_URL": "http://127.0.0.1:7"}
    settings = load_settings(env=env)
    assert settings.services.openai_base_url == "http://127.0.0.1:9/v1"
    assert settings.services.label_studio_url == "http://127.0.0.1:7"
    assert settings.db_url == "postgresql+psycopg://u@h/db"


def test_secrets_come_from_the_environment_and_are_masked_when_shown():
    settings = load_settings(env={"OPENAI_API_KEY": "sk-very-secret", "HF_TOKEN": "hf_secret"})
    assert settings.secrets.openai_api_key.get_secret_value() == "sk-very-secret"
    shown = str(settings.masked())
    assert "sk-very-secret" not in shown and "hf_secret" not in shown
    assert settings.masked()["secrets"] == {"openai_api_key": "****", "label_studio_api_key": "(unset)",
                                            "hf_token": "****"}


def test_a_secret_in_a_settings_file_is_refused(tmp_path):
    path = write(tmp_path / "s.yaml", "generate:\n  openai_api_key: sk-oops\n")
    with pytest.raises(SettingsError, match="secrets come only from the environment"):
        load_settings(path, env={})


@pytest.mark.parametrize("text, message", [
    ("ingets:\n  min_side: 3\n", "unknown settings"),
    ("ingest:\n  min_side: lots\n", "ingest.min_side"),
    ("ingest: [1, 2\n", "not valid YAML"),
    ("- a list\n", "mapping"),
])
def test_bad_settings_files_say_what_is_wrong(tmp_path, text, message):
    with pytest.raises(SettingsError, match=message):
        load_settings(write(tmp_path / "s.yaml", text), env={})


def test_a_user_file_overrides_what_the_packaged_profile_sets(tmp_path):
    path = write(tmp_path / "s.yaml", "extract:\n  use: [supplied]\n")
    assert load_settings(path, env={}).raw["extract"]["use"] == ["supplied"]  # local profile says [supplied, rapidocr]


def test_an_unknown_profile_lists_the_known_ones():
    with pytest.raises(SettingsError, match="known profiles: gpu, local"):
        load_settings(profile="cloud", env={})


def test_a_stage_parses_its_own_section_with_its_own_model(tmp_path):
    class Knobs(BaseModel):
        batch_size: int = 1

    path = write(tmp_path / "s.yaml", "generate:\n  batch_size: 8\n")
    assert load_settings(path, env={}).section("generate", Knobs).batch_size == 8


@pytest.mark.parametrize("text, message", [
    ("filter:\n  blind:\n    rul: seed\n", r"filter\.blind\.rul: Extra inputs"),
    ("filter:\n  blnd: {}\n", r"filter\.blnd: Extra inputs"),
    ("filter:\n  blind:\n    solvers: [{kind: lerned}]\n", r"filter\.blind\.solvers\.0: .*'lerned'.*'learned'"),
    ("filter:\n  blind:\n    solvers: [{kind: learned, fold: 3}]\n", r"filter\.blind\.solvers\.0\.learned\.fold"),
    ("generate:\n  generators: [programatic]\n", r"generate\.generators: programatic: not an installed generator"),
    ("generate:\n  llm:\n    modle: gpt-4o\n", r"generate\.llm\.modle"),
    ("generate:\n  programatic: {}\n", r"generate\.programatic: .programatic. is neither a setting here \(generators, "
     r".*\) nor one of the installed generators \(conversation, image_sets, llm, programmatic, reform, temporal"),
    ("review:\n  overlapp: 2\n", r"review\.overlapp"),
    ("publish:\n  privat: true\n", r"publish\.privat"),
    ("evaluate:\n  models:\n    m: {kind: gpt}\n", r"evaluate\.models\.m: .*'gpt'"),
    ("extract:\n  use: [ocrr]\n", r"extract: use: no extractor named 'ocrr'"),
    ("extract:\n  extractors:\n    ocr: {backend: rapidocr, min_scor: 0.3}\n", r"extractors\.ocr\.min_scor"),
    ("extract:\n  extractors:\n    ocr: {backend: rapidocrr}\n",
     r"extract\.extractors\.ocr\.backend: 'rapidocrr' is not one of the installed extractors \(.*rapidocr"),
])
def test_a_typo_in_any_stage_section_is_refused_when_settings_load(tmp_path, text, message):
    from benchsmith.errors import BenchsmithError

    with pytest.raises(BenchsmithError, match=message):
        load_settings(write(tmp_path / "s.yaml", text), env={})


def test_every_packaged_profile_passes_every_section_check():
    for profile in ("local", "gpu"):
        assert load_settings(profile=profile, env={}).profile == profile


def test_a_config_key_leaves_out_only_the_fields_a_settings_model_marks_unkeyed():
    class Knobs(BaseModel):
        tasks: int = 1                                       # a name one of ours leaves out; here it counts
        workers: int = Field(2, json_schema_extra=UNKEYED)   # speed only

    assert keyed(Knobs(tasks=3, workers=8)) == {"tasks": 3}
