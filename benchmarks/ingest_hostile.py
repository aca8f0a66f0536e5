"""Ingest of a folder mixing N good images with every kind of hostile file (issue 18).

Target: the run finishes (no hang, no crash) with every good image added and exactly one refusal
verdict per bad file. Bad kinds, `--copies` of each: a FIFO named *.jpg, a symlink loop, a dangling
link, a link to a device, a directory named *.jpg, a file name that is not UTF-8, a 4 GiB sparse file
that starts with a JPEG marker, an empty file, text named *.jpg, a truncated PNG. Peak memory shows
the huge file was never read. Results: benchmarks/results/ingest_hostile.json.

    .venv/bin/python benchmarks/ingest_hostile.py            # 10,000 good images
    .venv/bin/python benchmarks/ingest_hostile.py --n 1000   # smaller, for a loaded box
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, in_child, peak_rss_mb, save, timed  # noqa: E402
from benchmarks.ingest_throughput import make_images  # noqa: E402


def make_bad_files(folder: Path, copies: int) -> dict[str, str]:
    """Write the hostile files; returns {name as it will be reported: expected rule}."""
    bad = folder / "bad"
    bad.mkdir()
    expected: dict[str, str] = {}
    good_png = next(folder.rglob("*.png")).read_bytes()
    for i in range(copies):
        os.mkfifo(bad / f"fifo_{i}.jpg")
        expected[f"bad/fifo_{i}.jpg"] = "not_a_file"
        os.symlink(bad / f"loop_{i}_b.jpg", bad / f"loop_{i}_a.jpg")
        os.symlink(bad / f"loop_{i}_a.jpg", bad / f"loop_{i}_b.jpg")
        expected[f"bad/loop_{i}_a.jpg"] = expected[f"bad/loop_{i}_b.jpg"] = "unreadable"
        os.symlink(bad / f"gone_{i}.png", bad / f"dangling_{i}.png")
        expected[f"bad/dangling_{i}.png"] = "missing"
        os.symlink("/dev/zero", bad / f"zero_{i}.jpg")
        expected[f"bad/zero_{i}.jpg"] = "escapes_root"
        (bad / f"folder_{i}.jpg").mkdir()  # walked as a folder: holds nothing, so no verdict
        with open(os.fsencode(bad) + f"/caf\xe9_{i}.png".encode("latin-1"), "wb") as handle:
            handle.write(good_png[:-12] + bytes([i]) * 12)
        expected[f"bad/caf\\xe9_{i}.png"] = "bad_name"
        with open(bad / f"huge_{i}.jpg", "wb") as handle:
            handle.write(b"\xff\xd8\xff\xe0")
            handle.truncate(4 * 1024**3)
        expected[f"bad/huge_{i}.jpg"] = "too_large"
        (bad / f"empty_{i}.png").write_bytes(b"")
        expected[f"bad/empty_{i}.png"] = "empty"
        (bad / f"notes_{i}.jpg").write_text(f"not a photo {i}")
        expected[f"bad/notes_{i}.jpg"] = "not_an_image"
        (bad / f"cut_{i}.png").write_bytes(good_png[: len(good_png) // 2] + bytes([i]))
        expected[f"bad/cut_{i}.png"] = "truncated"
    return expected


def measure(folder: str, n: int, workers: int, expected: dict[str, str]) -> dict:
    """Ingest the folder into a new store (in a child process, so its peak RSS is its own)."""
    from ingest.candidates import folder_candidates
    from ingest.stage import ingest
    from benchsmith.settings import IngestSettings
    from benchsmith.store import Store

    with tempfile.TemporaryDirectory() as tmp, Store(f"sqlite:///{tmp}/bench.db") as store:
        seconds, report = timed(lambda: ingest(store, Path(tmp) / "media", folder_candidates(Path(folder)),
                                               IngestSettings(), label="h", workers=workers))
        verdicts = store.get_verdicts(stage="ingest")
    found: dict[str, list[str]] = {}
    for verdict in verdicts:
        found.setdefault(verdict.subject_id.removeprefix("h:"), []).append(verdict.rule)
    return {"good_images": n, "bad_files": len(expected), "workers": workers, "seconds": round(seconds, 2),
            "files_per_s": round((n + len(expected)) / seconds, 1), "added": report.added,
            "verdicts": len(verdicts),
            "one_verdict_per_bad_file": {name: [rule] for name, rule in expected.items()} == found,
            "refused_by_rule": dict(sorted(report.rejected.items())),
            "peak_rss_mb": peak_rss_mb()}


if __name__ == "__main__":
    # n good images, copies of each bad kind, timeout: seconds before the run counts as hung
    args = arguments(__doc__, n=10_000, copies=3, workers=2, timeout=900.0).parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "photos"
        make_images(folder, args.n)
        expected = make_bad_files(folder, args.copies)
        try:
            result = in_child(__file__, "measure", folder, args.n, args.workers, expected, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            result = {"good_images": args.n, "hung": True, "timeout_s": args.timeout}
    save("ingest_hostile", result)
