"""A read-only or full workspace gives a clear error, and a rerun after fixing it completes."""

from __future__ import annotations

import json

from ingest.scenes import make_scenes
from tests.faults.conftest import remount, run_cli


def test_a_read_only_workspace_is_a_clear_error(mount_tmpfs, tmp_path):
    scenes = make_scenes(tmp_path / "scenes", 3, seed=21)
    read_only = mount_tmpfs("ro", read_only=True)
    result = run_cli("--workspace", str(read_only / "bench"), "ingest", str(scenes), cwd=tmp_path)
    assert result.returncode == 2
    assert "Read-only file system" in result.stderr and "Traceback" not in result.stderr


def test_a_full_workspace_stops_cleanly_and_a_rerun_with_space_finishes_the_job(mount_tmpfs, tmp_path):
    scenes = make_scenes(tmp_path / "scenes", 12, seed=22)
    small = mount_tmpfs("small", size="200k")
    workspace = str(small / "bench")
    full = run_cli("--workspace", workspace, "ingest", str(scenes), cwd=tmp_path)
    assert full.returncode == 2, full.stdout + full.stderr
    assert ("No space left on device" in full.stderr or "disk is full" in full.stderr) and "Traceback" not in full.stderr

    remount(small, "size=16m")
    rerun = run_cli("--workspace", workspace, "ingest", str(scenes), cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    status = json.loads(run_cli("--workspace", workspace, "status", "--json", cwd=tmp_path).stdout)
    assert status["items"] == {"image/ok": 12}
    assert status["refused_inputs"] == {}
