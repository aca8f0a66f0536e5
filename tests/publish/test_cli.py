"""`benchsmith publish` and `benchsmith stats` as a user runs them, in a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

import datasets
import pandas as pd

from benchsmith.store import Store
from tests.publish.conftest import build_reviewed

CLI = [sys.executable, "-c", "from flows.app import main; main()"]


def benchsmith(workspace, *args, env_extra=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHSMITH") and k != "HF_TOKEN"}
    env |= {"BENCHSMITH_WORKSPACE": str(workspace), "COLUMNS": "200"} | (env_extra or {})
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=300)


def test_publish_then_stats_from_the_command_line(settings, oracle_dir, tmp_path):
    with Store(settings.db_url) as store:
        reviewed = build_reviewed(store, settings, oracle_dir, tmp_path)

    done = benchsmith(settings.workspace, "publish", "--version", "v1")
    assert done.returncode == 0, done.stderr
    assert "Release v1" in done.stdout and "instances_counting" in done.stdout
    folder = settings.workspace / "releases" / "v1"
    rows = datasets.load_dataset(str(folder), split="test", cache_dir=str(tmp_path / "cache"))
    assert len(rows) == len(reviewed.accepted_ids)

    stats = benchsmith(settings.workspace, "stats", "--status", "published", "--out", str(tmp_path / "stats"))
    assert stats.returncode == 0, stats.stderr
    assert "Funnel" in stats.stdout and "Answer balance" in stats.stdout
    funnel = pd.read_csv(tmp_path / "stats" / "funnel.csv").set_index("step")["count"]
    assert funnel["published"] == len(reviewed.accepted_ids)
    counts = pd.read_csv(tmp_path / "stats" / "dimension_counts.csv").set_index("dimension_id")["count"]
    assert counts.to_dict() == {d: len(ids) for d, ids in reviewed.accepted.items()}
    assert (tmp_path / "stats" / "funnel.png").is_file()


def test_errors_are_one_clear_line_and_exit_code_2(settings, oracle_dir, tmp_path):
    empty = benchsmith(settings.workspace, "publish", "--version", "v1")
    assert empty.returncode == 2 and "no accepted questions" in empty.stderr and "Traceback" not in empty.stderr

    bad_status = benchsmith(settings.workspace, "stats", "--status", "aproved")
    assert bad_status.returncode == 2 and "unknown status aproved" in bad_status.stderr

    with Store(settings.db_url) as store:
        build_reviewed(store, settings, oracle_dir, tmp_path)
    no_token = benchsmith(settings.workspace, "publish", "--version", "v1", "--push", "acme/shapes",
                          env_extra={"HF_HUB_OFFLINE": "0"})
    assert no_token.returncode == 2 and "HF_TOKEN" in no_token.stderr
    offline = benchsmith(settings.workspace, "publish", "--version", "v1", "--push", "acme/shapes",
                         env_extra={"HF_HUB_OFFLINE": "1", "HF_TOKEN": "hf_fake"})
    assert offline.returncode == 2 and "HF_HUB_OFFLINE" in offline.stderr and "hf_fake" not in offline.stderr
    assert (settings.workspace / "releases" / "v1" / "README.md").is_file()   # built even though the push failed
