"""`benchsmith extract` as a user runs it: the installed command in a fresh workspace."""

from __future__ import annotations

import json

from tests.benchsmith.test_cli import run


def test_extract_reads_the_scenes_then_a_rerun_has_nothing_to_do(tmp_path):
    assert run("scenes", "make", "--n", "4", "--seed", "5", "--out", "scenes", cwd=tmp_path).returncode == 0
    assert run("ingest", "scenes/manifest.jsonl", cwd=tmp_path).returncode == 0
    # RapidOCR is quiet by default; with its own log level at info, loading its models logs lines.
    chatty = {"BENCHSMITH__EXTRACT__EXTRACTORS__RAPIDOCR__ENGINE_PARAMS": '{"Global.log_level": "info"}'}
    first = run("extract", cwd=tmp_path, env=chatty)
    assert first.returncode == 0, first.stderr
    assert "supplied" in first.stdout and "rapidocr" in first.stdout
    assert "RapidOCR" in first.stderr + first.stdout  # its load logs a line
    extractions = json.loads(run("status", "--json", cwd=tmp_path, env=chatty).stdout)["extractions"]
    assert sorted(key.split(":")[0] for key in extractions) == ["rapidocr", "supplied"]
    assert all(key.endswith("[done]") and count == 4 for key, count in extractions.items())
    again = run("extract", cwd=tmp_path, env=chatty)
    assert again.returncode == 0, again.stderr
    assert "rapidocr" in again.stdout and "RapidOCR" not in again.stderr + again.stdout, "no model loads on a rerun"
    quiet = run("extract", cwd=tmp_path)  # default settings, another key: RapidOCR loads and reads, quietly
    assert quiet.returncode == 0 and "RapidOCR" not in quiet.stderr + quiet.stdout


def test_missing_gpu_weights_are_one_clear_line_and_nothing_is_written(tmp_path):
    assert run("scenes", "make", "--n", "2", "--seed", "5", "--out", "scenes", cwd=tmp_path).returncode == 0
    assert run("ingest", "scenes/manifest.jsonl", cwd=tmp_path).returncode == 0
    failed = run("--profile", "gpu", "extract", "--only", "blip2", cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"})
    assert failed.returncode == 2
    message = failed.stderr.strip()
    assert "Salesforce/blip2-opt-2.7b" in message and "Traceback" not in message
    assert json.loads(run("status", "--json", cwd=tmp_path).stdout)["extractions"] == {}


def test_an_unknown_extractor_name_is_refused(tmp_path):
    refused = run("extract", "--only", "tesseract", cwd=tmp_path)
    assert refused.returncode == 2
    assert "no extractor named 'tesseract'" in refused.stderr and "Traceback" not in refused.stderr


def test_help_explains_the_command(tmp_path):
    shown = run("extract", "--help", cwd=tmp_path)
    assert shown.returncode == 0 and "--retry-failed" in shown.stdout and "rerun" in shown.stdout
