"""Hostile inputs to ingest: each bad file is one refused input with a reason, and the run goes on."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from PIL import Image

from ingest.sources import candidates_for
from ingest.stage import ingest
from benchsmith.settings import IngestSettings
from tests.faults.conftest import run_cli
from tests.ingest.test_sources import png

SETTINGS = IngestSettings(min_side=16, max_pixels=10_000_000, batch_size=4, max_bytes=1_000_000)


def run_bounded(function, *args, seconds: float = 60, **kwargs):
    """Run `function` in a thread and fail the test, not hang it, if it does not return in time."""
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = function(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test below
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{function.__name__} did not finish in {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def refusals(store, label: str) -> dict[str, str]:
    return {v.subject_id.removeprefix(f"{label}:"): v.rule for v in store.get_verdicts(stage="ingest")}


def test_a_manifest_row_naming_a_symlink_loop_is_refused_and_the_good_rows_are_ingested(store, tmp_path):
    png(tmp_path / "good.png")
    os.symlink(tmp_path / "loop_b.jpg", tmp_path / "loop_a.jpg")
    os.symlink(tmp_path / "loop_a.jpg", tmp_path / "loop_b.jpg")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"path": "loop_a.jpg"}) + "\n" + json.dumps({"path": "good.png"}) + "\n")
    report = ingest(store, tmp_path / "media", candidates_for(manifest), SETTINGS, label="m")
    assert report.added == 1
    assert refusals(store, "m") == {"loop_a.jpg": "unreadable"}
    [verdict] = store.get_verdicts(stage="ingest")
    assert "symlink loop" in verdict.reason


def test_dataset_cells_naming_files_outside_the_dataset_folder_are_refused_like_manifest_paths(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "downloaded"
    png(data / "img" / "in.png")
    png(tmp_path / "private.png", (1, 2, 3))
    cells = [{"bytes": None, "path": p}
             for p in ("img/in.png", "../private.png", str(tmp_path / "private.png"), "/etc/passwd")]
    pq.write_table(pa.table({"image": cells}), data / "rows.parquet")
    result = run_cli("ingest", "rows.parquet", "--image-column", "image", cwd=data,
                     env={"BENCHSMITH_WORKSPACE": str(tmp_path / "ws")})
    assert result.returncode == 0, result.stderr
    assert "1 added" in result.stdout and "3 refused (3 escapes_root)" in result.stdout
    assert len([f for f in (tmp_path / "ws" / "media").rglob("*") if f.is_file()]) == 1


def test_special_files_in_a_folder_are_refused_without_opening_them(store, tmp_path):
    root = tmp_path / "photos"
    png(root / "good.png")
    os.mkfifo(root / "fifo.jpg")
    (root / "folder.jpg").mkdir()  # a directory named like an image: walked, holds nothing
    os.symlink(root / "loop2.jpg", root / "loop1.jpg")
    os.symlink(root / "loop1.jpg", root / "loop2.jpg")
    os.symlink("/dev/zero", root / "zero.jpg")  # a device, reached through a link that leaves the folder
    os.symlink("/dev/null", root / "null.jpg")
    report = run_bounded(ingest, store, tmp_path / "media", candidates_for(root), SETTINGS, label="p", seconds=60)
    assert report.added == 1
    found = refusals(store, "p")
    assert found["fifo.jpg"] == "not_a_file"
    assert found["loop1.jpg"] == "unreadable" and found["loop2.jpg"] == "unreadable"
    assert found["zero.jpg"] == "escapes_root" and found["null.jpg"] == "escapes_root"
    fifo = next(v for v in store.get_verdicts(stage="ingest") if v.subject_id == "p:fifo.jpg")
    assert "FIFO" in fifo.reason


def test_a_device_inside_the_manifest_folder_is_not_read(store, tmp_path):
    png(tmp_path / "good.png")
    os.mkfifo(tmp_path / "pipe.png")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"path": "pipe.png"}) + "\n" + json.dumps({"path": "good.png"}) + "\n")
    report = run_bounded(ingest, store, tmp_path / "media", candidates_for(manifest), SETTINGS, label="m")
    assert report.added == 1 and refusals(store, "m") == {"pipe.png": "not_a_file"}


def test_a_name_that_is_not_utf8_is_refused_by_its_escaped_name_before_any_copy(store, tmp_path):
    root = tmp_path / "photos"
    png(root / "good.png")
    bad = os.fsencode(root) + b"/caf\xe9.png"
    data = (root / "good.png").read_bytes()
    png(tmp_path / "other.png", (10, 220, 10))
    with open(bad, "wb") as handle:
        handle.write((tmp_path / "other.png").read_bytes())
    report = ingest(store, tmp_path / "media", candidates_for(root), SETTINGS, label="p")
    assert report.added == 1 and report.rejected == {"bad_name": 1}
    [verdict] = store.get_verdicts(stage="ingest")
    assert verdict.subject_id == "p:caf\\xe9.png" and "caf\\xe9.png" in verdict.reason
    media = [p for p in (tmp_path / "media").rglob("*") if p.is_file()]
    assert len(media) == 1 and media[0].read_bytes() == data  # nothing orphaned for the refused file
    again = ingest(store, tmp_path / "media", candidates_for(root), SETTINGS, label="p")
    assert (again.seen, again.skipped, again.rejected) == (2, 2, {})  # neither file is read or judged again


def test_a_huge_file_that_starts_like_a_jpeg_is_refused_by_its_size_without_reading_it(store, tmp_path):
    root = tmp_path / "photos"
    png(root / "good.png")
    with open(root / "huge.jpg", "wb") as handle:
        handle.write(b"\xff\xd8\xff\xe0")
        handle.truncate(4 * 1024**3)  # 4 GiB, sparse: reading it whole would take the memory it claims
    report = run_bounded(ingest, store, tmp_path / "media", candidates_for(root), SETTINGS, label="p", seconds=30)
    assert report.added == 1 and refusals(store, "p") == {"huge.jpg": "too_large"}
    [verdict] = store.get_verdicts(stage="ingest")
    assert "ingest.max_bytes" in verdict.reason


def test_a_csv_manifest_saved_by_excel_with_bom_and_crlf_reads(store, tmp_path):
    png(tmp_path / "a.png")
    png(tmp_path / "b.png", (0, 0, 230))
    (tmp_path / "m.csv").write_bytes(b"\xef\xbb\xbfpath,caption\r\na.png,a red square\r\nb.png,a blue square\r\n")
    report = ingest(store, tmp_path / "media", candidates_for(tmp_path / "m.csv"), SETTINGS, label="m")
    assert report.added == 2 and not report.rejected
    assert sorted(i.annotations["captions"][0] for i in store.get_items()) == ["a blue square", "a red square"]


def test_a_latin1_jsonl_manifest_refuses_the_lines_it_cannot_decode_and_names_them(store, tmp_path):
    png(tmp_path / "a.png")
    png(tmp_path / "b.png", (0, 0, 230))
    (tmp_path / "m.jsonl").write_bytes(b'{"path": "a.png", "caption": "caf\xe9 table"}\n{"path": "b.png"}\n')
    report = ingest(store, tmp_path / "media", candidates_for(tmp_path / "m.jsonl"), SETTINGS, label="m")
    assert report.added == 1 and report.rejected == {"bad_manifest_row": 1}
    [verdict] = store.get_verdicts(stage="ingest")
    assert verdict.subject_id == "m:m.jsonl:1"
    assert "line 1" in verdict.reason and "UTF-8" in verdict.reason


@pytest.mark.parametrize(("label", "problem"), [
    ("<img src=x onerror=alert(1)>", "markup"),
    ("", "empty"),
    ("x" * 100_000, "characters"),
])
def test_hostile_labels_are_refused_with_a_reason(store, tmp_path, label, problem):
    png(tmp_path / "a.png", size=(100, 100))
    (tmp_path / "m.jsonl").write_text(json.dumps(
        {"path": "a.png", "objects": [{"label": label, "box": [0.1, 0.1, 0.5, 0.5]}]}) + "\n")
    report = ingest(store, tmp_path / "media", candidates_for(tmp_path / "m.jsonl"), SETTINGS, label="m")
    assert report.added == 0 and report.rejected == {"bad_annotations": 1}
    [verdict] = store.get_verdicts(stage="ingest")
    assert problem in verdict.reason and len(verdict.reason) < 300


def test_an_emoji_label_is_kept(store, tmp_path):
    png(tmp_path / "a.png", size=(100, 100))
    (tmp_path / "m.jsonl").write_text(json.dumps(
        {"path": "a.png", "objects": [{"label": "cat 🐱", "box": [0.1, 0.1, 0.5, 0.5]}]}) + "\n")
    report = ingest(store, tmp_path / "media", candidates_for(tmp_path / "m.jsonl"), SETTINGS, label="m")
    assert report.added == 1
    assert store.get_items()[0].annotations["objects"][0]["label"] == "cat 🐱"


def test_a_device_file_in_a_folder_is_refused_without_reading_it(store, tmp_path):
    import stat

    root = tmp_path / "photos"
    png(root / "good.png")
    os.mknod(root / "null.jpg", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers: root only
    report = run_bounded(ingest, store, tmp_path / "media", candidates_for(root), SETTINGS, label="p")
    assert report.added == 1 and refusals(store, "p") == {"null.jpg": "not_a_file"}
    [verdict] = store.get_verdicts(stage="ingest")
    assert "character device" in verdict.reason


def test_a_video_manifest_row_naming_a_symlink_loop_or_a_fifo_is_refused_and_the_run_goes_on(store, tmp_path):
    from ingest.videos import ingest_videos, make_moving_shapes

    make_moving_shapes(tmp_path, 1, seed=4)
    good = json.loads((tmp_path / "manifest.jsonl").read_text().splitlines()[0])
    os.symlink(tmp_path / "b.mp4", tmp_path / "a.mp4")
    os.symlink(tmp_path / "a.mp4", tmp_path / "b.mp4")
    os.mkfifo(tmp_path / "pipe.mp4")
    segments = [{"start": 0, "end": 1, "label": "x"}]
    manifest = tmp_path / "videos.jsonl"
    manifest.write_text("\n".join(json.dumps(r) for r in [{"path": "a.mp4", "segments": segments},
                                                          {"path": "pipe.mp4", "segments": segments}, good]) + "\n")
    report = run_bounded(ingest_videos, store, tmp_path / "media", manifest, frames=4)
    assert report.added == 1 and report.rejected == {"unreadable": 1, "not_a_file": 1}


def test_ingest_workers_end_when_the_parent_is_killed(tmp_path):
    import signal
    import subprocess
    import time

    from benchmarks.ingest_throughput import make_images
    from tests.faults.conftest import BENCHSMITH

    make_images(tmp_path / "photos", 3000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHSMITH")} | {
        "BENCHSMITH_WORKSPACE": str(tmp_path / "bench"), "BENCHSMITH__INGEST__BATCH_SIZE": "64"}
    parent = subprocess.Popen([BENCHSMITH, "ingest", "--workers", "2", str(tmp_path / "photos")], env=env,
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children_file = Path(f"/proc/{parent.pid}/task/{parent.pid}/children")
    workers: list[int] = []
    deadline = time.time() + 60
    while len(workers) < 2 and time.time() < deadline and parent.poll() is None:
        workers = [int(pid) for pid in children_file.read_text().split()] if children_file.exists() else []
        time.sleep(0.05)
    assert len(workers) >= 2, "the ingest never started its workers"
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 15
    alive = workers
    while alive and time.time() < deadline:
        alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()
                 and "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]]
        time.sleep(0.1)
    assert not alive, f"workers {alive} outlived their killed parent"
