"""`benchsmith generate` and `benchsmith videos` as a user runs them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

BENCHSMITH = str(Path(sys.executable).with_name("benchsmith"))


def run(tmp_path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "OPENAI"))} | extra_env
    env["BENCHSMITH_WORKSPACE"] = str(tmp_path / "bench")
    return subprocess.run([BENCHSMITH, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_videos_in_then_temporal_questions_out_and_a_rerun_does_nothing(tmp_path):
    assert run(tmp_path, "videos", "synth", "--out", "clips", "--n", "3").returncode == 0
    added = run(tmp_path, "videos", "add", "clips/manifest.jsonl")
    assert added.returncode == 0 and "3 added" in added.stdout
    first = run(tmp_path, "generate", "--generator", "temporal")
    assert first.returncode == 0, first.stderr
    assert re.search(r"jobs\s+│\s+9 ", first.stdout)  # 3 videos x 3 temporal dimensions
    assert int(re.search(r"kept\s+│\s+(\d+) ", first.stdout).group(1)) > 9
    again = run(tmp_path, "generate", "--generator", "temporal")
    assert again.returncode == 0 and re.search(r"jobs\s+│\s+0 ", again.stdout)


def test_an_unreachable_llm_server_loses_nothing_and_says_to_rerun(tmp_path):
    from tests.conftest import free_port

    env_extra = {"OPENAI_BASE_URL": f"http://127.0.0.1:{free_port()}/v1",
                 "BENCHSMITH__GENERATE__LLM__OPTIONS__MAX_RETRIES": "1",
                 "BENCHSMITH__GENERATE__LLM__OPTIONS__BACKOFF_S": "0.01"}
    from benchsmith.records import Fact, Image, Provenance
    from benchsmith.store import Store
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        store.add_items([Image(id="img", path="img.png", width=64, height=64)])
        store.add_facts("supplied", [Fact(item_id="img", kind="caption", text="A red bus.",
                                                         provenance=Provenance(backend="supplied"))])
    result = run(tmp_path, "generate", "--generator", "llm", "--dimension", "scene_understanding", **env_extra)
    assert result.returncode == 0, result.stderr
    assert "1 job(s) got no answer from the LLM (APIConnectionError" in result.stdout
    assert "rerun `benchsmith generate`" in result.stdout


def test_images_without_facts_are_pointed_at_extract(tmp_path):
    from benchsmith.records import Image
    from benchsmith.store import Store
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        store.add_items([Image(id="img", path="img.png", width=64, height=64)])
    result = run(tmp_path, "generate", "--generator", "programmatic")
    assert result.returncode == 0, result.stderr
    assert "6 job(s) wait for facts: run `benchsmith extract`, then generate again" in result.stdout


def test_bad_requests_are_one_line_errors(tmp_path):
    for args, message in ((("generate", "--generator", "magic"), "magic: not an installed generator"),
                          (("generate", "--dimension", "colourfulness"), "unknown dimension 'colourfulness'"),
                          (("videos", "add", "nowhere.jsonl"), "video manifest not found")):
        result = run(tmp_path, *args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr
