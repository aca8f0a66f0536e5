"""How good are the `centernet` extractor's boxes against COCO's own?

Runs the extractor as configured (benchsmith/settings.yaml, `extract.extractors.centernet`, with its score
threshold lowered to --floor so one pass serves every threshold) on the real COCO photos of the shared
data: coco128 (YOLO labels) and coco-mini-train (an instances JSON; `iscrowd` regions are neither truth to
find nor errors to count: a detection on one is ignored). A detection is right when it has the class of a
truth box not yet taken with IoU >= 0.5 (greedy, best score first, per image and class). Per COCO
supercategory (person, vehicle, animal, kitchen, food, furniture...) and overall:
- precision and recall at the profile's `min_score`, and at each of --thresholds;
- AP50: the area under each class's precision-recall curve (COCO's 101-point interpolation) over all
  detections above the floor, averaged over the classes of the group that have truth.
And seconds_per_image (median, the extractor's call: resize, Node round trip, selection).
Results: benchmarks/results/detector.json.

    .venv/bin/python benchmarks/detector.py            # all 332 photos
    .venv/bin/python benchmarks/detector.py --quick    # 40 photos
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, save  # noqa: E402
from tests.support.shared_data import require_shared_data  # noqa: E402

IOU_MATCH = 0.5


def coco_truth() -> list[dict]:
    """Every photo of coco128 and coco-mini-train: {source, path, size, boxes: [(class name, unit xyxy, crowd)]}."""
    from benchsmith.geometry import unit_box

    photos = []
    instances = json.loads(require_shared_data("coco-mini-train", "annotations", "instances_train2017.json")
                           .read_text(encoding="utf-8"))
    names = {c["id"]: c["name"] for c in instances["categories"]}
    boxes = defaultdict(list)
    for a in instances["annotations"]:
        boxes[a["image_id"]].append(a)
    for image in instances["images"]:
        w, h = image["width"], image["height"]
        photos.append({"source": "coco-mini-train", "size": (w, h),
                       "path": require_shared_data("coco-mini-train", "train2017", image["file_name"]),
                       "boxes": [(names[a["category_id"]], unit_box(w, h, bbox=a["bbox"], model_output=True),
                                  bool(a["iscrowd"])) for a in boxes[image["id"]]]})
    classes = coco_classes()
    root = require_shared_data("coco128")
    for label_file in sorted((root / "object_detection" / "labels").glob("*/*.txt")):
        image = root / "images" / label_file.parent.name / f"{label_file.stem}.jpg"
        truth = []
        for line in label_file.read_text().splitlines():
            c, cx, cy, w, h = line.split()
            cx, cy, w, h = map(float, (cx, cy, w, h))
            truth.append((classes[int(c)], (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), False))
        photos.append({"source": "coco128", "path": image, "boxes": truth})
    return photos


def coco_classes() -> tuple[str, ...]:
    from extractors.detector import coco_classes as names

    return names()


def supercategories() -> dict[str, str]:
    instances = json.loads(require_shared_data("coco-mini-train", "annotations", "instances_train2017.json")
                           .read_text(encoding="utf-8"))
    return {c["name"]: c["supercategory"] for c in instances["categories"]}


def match(detections: list[tuple[str, float, tuple]], truth: list[tuple[str, tuple, bool]]) -> list[tuple[str, float, str]]:
    """Each detection as (class, score, 'tp' | 'fp' | 'ignored'): greedy by score, one truth box each."""
    from benchsmith.geometry import iou

    taken: set[int] = set()
    out = []
    for label, score, box in sorted(detections, key=lambda d: -d[1]):
        best, best_iou = None, IOU_MATCH
        for index, (t_label, t_box, crowd) in enumerate(truth):
            if t_label == label and not crowd and index not in taken and iou(box, t_box) >= best_iou:
                best, best_iou = index, iou(box, t_box)
        if best is not None:
            taken.add(best)
            out.append((label, score, "tp"))
        elif any(t_label == label and crowd and iou(box, t_box) >= IOU_MATCH for t_label, t_box, crowd in truth):
            out.append((label, score, "ignored"))
        else:
            out.append((label, score, "fp"))
    return out


def average_precision(scored: list[tuple[float, bool]], positives: int) -> float:
    """COCO's 101-point interpolated AP of detections (score, right?) against `positives` truth boxes."""
    if not positives:
        return 0.0
    tp = fp = 0
    curve = []
    for _score, right in sorted(scored, key=lambda s: -s[0]):
        tp, fp = tp + right, fp + (not right)
        curve.append((tp / positives, tp / (tp + fp)))
    points = []
    for r in (i / 100 for i in range(101)):
        points.append(max((p for rec, p in curve if rec >= r), default=0.0))
    return sum(points) / len(points)


def evaluate(results: list[tuple[list, list]], threshold: float, groups: dict[str, str]) -> dict:
    """Precision and recall per group at `threshold`."""
    counts = defaultdict(lambda: {"tp": 0, "fp": 0, "truth": 0})
    for matched, truth in results:
        for label, _box, crowd in truth:
            if not crowd:
                counts[groups[label]]["truth"] += 1
                counts["all"]["truth"] += 1
        for label, score, verdict in matched:
            if score >= threshold and verdict != "ignored":
                for group in (groups[label], "all"):
                    counts[group][verdict] += 1
    return {group: {"precision": round(c["tp"] / (c["tp"] + c["fp"]), 3) if c["tp"] + c["fp"] else None,
                    "recall": round(c["tp"] / c["truth"], 3) if c["truth"] else None, **c}
            for group, c in sorted(counts.items())}


def ap50(results: list[tuple[list, list]], groups: dict[str, str]) -> dict:
    by_class: dict[str, list] = defaultdict(list)
    positives: dict[str, int] = defaultdict(int)
    for matched, truth in results:
        for label, _box, crowd in truth:
            positives[label] += not crowd
        for label, score, verdict in matched:
            if verdict != "ignored":
                by_class[label].append((score, verdict == "tp"))
    per_class = {label: average_precision(by_class[label], n) for label, n in positives.items() if n}
    out: dict[str, list] = defaultdict(list)
    for label, ap in per_class.items():
        out[groups[label]].append(ap)
        out["all"].append(ap)
    return {group: {"ap50": round(statistics.mean(aps), 3), "classes": len(aps)} for group, aps in sorted(out.items())}


def main() -> None:
    parser = arguments(__doc__, quick={"photos": 40}, photos=0, floor=0.05, thresholds=[0.1, 0.2, 0.3, 0.4, 0.5])
    args = parser.parse_args()

    from benchsmith.images import open_rgb
    from benchsmith.settings import load_settings
    from extractors.base import build_extractors

    settings = load_settings(None, env={})
    detector = build_extractors(settings, only=["centernet"])[0]
    profile_score = detector.params.min_score
    detector.params = detector.params.model_copy(update={"min_score": args.floor, "max_boxes": 100})
    detector.load()
    photos = coco_truth()
    if args.photos:
        photos = photos[:args.photos // 2] + photos[-(args.photos - args.photos // 2):]
    groups = supercategories()
    results, seconds = [], []
    for index, photo in enumerate(photos, 1):
        pixels = open_rgb(photo["path"])
        started = time.perf_counter()
        found = detector.detections(pixels)
        seconds.append(time.perf_counter() - started)
        detections = [(detector.classes[label], score, box) for label, score, box in found]
        results.append((match(detections, photo["boxes"]), photo["boxes"], photo["source"]))
        if index % 25 == 0:
            print(f"{index}/{len(photos)} photos", file=sys.stderr)
    detector.close()
    pairs = [(m, t) for m, t, _s in results]
    by_source = {source: [(m, t) for m, t, s in results if s == source] for source in ("coco128", "coco-mini-train")}
    save("detector", {
        "photos": len(photos), "truth_boxes": sum(1 for _m, t in pairs for b in t if not b[2]),
        "profile_min_score": profile_score, "nms_iou": detector.params.nms_iou, "iou_match": IOU_MATCH,
        "seconds_per_image": round(statistics.median(seconds), 3),
        "at_profile_score": evaluate(pairs, profile_score, groups),
        "at_profile_score_by_source": {s: evaluate(p, profile_score, groups)["all"] for s, p in by_source.items()},
        "ap50": ap50(pairs, groups),
        "ap50_by_source": {s: ap50(p, groups)["all"] for s, p in by_source.items()},
        "overall_by_threshold": {str(t): evaluate(pairs, t, groups)["all"] for t in args.thresholds},
    })


if __name__ == "__main__":
    main()
