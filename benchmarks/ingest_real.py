"""Ingest of the 332 real COCO photos of ../shared/data through the CLI, as a user runs it: the 80 of
coco-mini-train from their COCO instances and captions JSON, the 252 of coco128 from their YOLO labels.

Per source and run: the command's wall seconds (process start, the listing, decoding and checking every
photo, the store writes, and the richness check with spaCy) and photos per second; the same with the
richness check off (`ingest.richness.enabled: false`), which leaves the ingest itself; then a rerun, which
reads nothing that has not changed. Also counted from the store, by this script: photos added, boxes kept,
crowd regions and boxes dropped by reason, and what the richness check did (passed on the captions' nouns,
passed on objects alone, excluded, waiting for a caption). Each run starts from an empty workspace.
Results: benchmarks/results/ingest_real.json.

    .venv/bin/python benchmarks/ingest_real.py               # 3 runs, the median reported
    .venv/bin/python benchmarks/ingest_real.py --quick       # 1 run
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, cli, save, user_env  # noqa: E402


def sources(data: Path) -> dict[str, list[str]]:
    return {"coco-mini-train (COCO JSON)": [str(data / "coco-mini-train" / "annotations" / "instances_train2017.json")],
            "coco128 (YOLO)": [str(data / "coco128" / "object_detection" / "config.yaml"),
                               "--images", str(data / "coco128")]}


def counted(workspace: Path) -> dict:
    from benchsmith.store import Store

    with Store(f"sqlite:///{workspace / 'bench' / 'benchsmith.db'}") as store:
        images = store.get_items(kind="image", status=None)
        verdicts = store.get_verdicts(stage="richness")
    objects = [o for i in images for o in i.annotations.get("objects", [])]
    dropped = Counter(d["rule"] for i in images for d in i.annotations.get("dropped", []))
    min_nouns = 6  # the packaged ingest.richness.min_nouns, which this benchmark leaves as it is
    richness = Counter("excluded" if not v.passed else "passed on nouns" if (v.details["nouns"] or 0) >= min_nouns
                       else "passed on objects alone" for v in verdicts)
    richness["waiting for a caption"] = len(images) - len(verdicts)
    return {"photos": len(images), "boxes_kept": len(objects),
            "crowd_regions": sum(bool(o.get("crowd")) for o in objects),
            "boxes_dropped": dict(dropped), "richness": dict(richness)}


def main() -> None:
    from tests.support.shared_data import shared_data_dir

    options = arguments(__doc__, quick={"runs": 1}, runs=3).parse_args()
    data = shared_data_dir()
    if not data.exists():
        sys.exit(f"real data not found at {data}: lay ../shared/data beside the checkout, "
                 "or set BENCHSMITH_SHARED_DATA")
    env = user_env()
    no_richness = env | {"BENCHSMITH__INGEST__RICHNESS__ENABLED": "false"}
    result = {"runs": options.runs, "sources": {}}
    for name, args in sources(data).items():
        first, bare, rerun, counts = [], [], [], {}
        for _ in range(options.runs):
            with tempfile.TemporaryDirectory() as tmp:
                seconds, printed = cli("ingest", *args, cwd=Path(tmp), env=env)
                again, printed_again = cli("ingest", *args, cwd=Path(tmp), env=env)
                assert "0 added" in printed_again, printed_again
                first.append(seconds)
                rerun.append(again)
                counts = counted(Path(tmp)) | {"summary": " ".join(printed.split())}
            with tempfile.TemporaryDirectory() as tmp:
                bare.append(cli("ingest", *args, cwd=Path(tmp), env=no_richness)[0])
        median, median_bare = statistics.median(first), statistics.median(bare)
        result["sources"][name] = {"seconds": round(median, 2), "photos_per_s": round(counts["photos"] / median, 1),
                                   "seconds_without_richness": round(median_bare, 2),
                                   "photos_per_s_without_richness": round(counts["photos"] / median_bare, 1),
                                   "rerun_seconds": round(statistics.median(rerun), 2),
                                   "all_seconds": [round(s, 2) for s in first]} | counts
    save("ingest_real", result)


if __name__ == "__main__":
    main()
