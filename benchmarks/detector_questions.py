"""What share of the programmatic questions built from the `centernet` detector's boxes is wrong?

The real COCO photos of the shared data (coco-mini-train's instances JSON, coco128's YOLO YAML) are
ingested with their boxes, but only the detector's boxes become facts (`extract.use: [centernet]`: the
supplied boxes are never read), then `generate -g programmatic` and the blind `filter` run as a user runs
them. Each question the filter keeps is judged here against COCO's boxes, read by this script's own code
from the dataset files, from the question's words alone (not the generator's metadata):
- count ("How many Xs ...?"): right when the key is the number of COCO instances of X; unknown when a
  crowd region of X is there; "arguable" when the key counts only the instances of at least --min-area;
- location ("In which part of the image is the X?"): COCO must have exactly one X (none, or several
  for "the X", is wrong); right when its centre is in the keyed cell of the 3x3 grid, arguable when the
  centre is within --margin of a dividing line;
- spatial ("Where is the X relative to the Y?"): one X and one Y in COCO; right when their boxes are
  apart in the keyed direction, arguable when only their centres are;
- identity ("Which of these can be seen?"): right when COCO has the keyed class and none of the three
  others.
Results: benchmarks/results/detector_questions.json (counts and shares per template, examples of wrong).

    .venv/bin/python benchmarks/detector_questions.py                       # the profile's min_score
    .venv/bin/python benchmarks/detector_questions.py --min-score 0.5 --out detector_questions_0.5
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, cli, save, user_env  # noqa: E402
from benchmarks.detector import coco_truth  # noqa: E402
from tests.support.shared_data import require_shared_data  # noqa: E402

RELATION_WORDS = {"to its left": "left", "to its right": "right", "above it": "above", "below it": "below"}
IRREGULAR = {"people": "person", "mice": "mouse", "knives": "knife", "tvs": "tv", "buses": "bus",
             "benches": "bench", "couches": "couch", "sandwiches": "sandwich", "wine glasses": "wine glass",
             "skis": "skis", "scissors": "scissors", "sheep": "sheep", "broccoli": "broccoli"}


def class_of(words: str, classes: set[str]) -> str | None:
    """The COCO class a question's noun phrase names ('dogs', 'the TV', 'people'), or None."""
    words = words.lower().strip()
    if words in IRREGULAR:
        return IRREGULAR[words]
    for candidate in (words, words[:-1] if words.endswith("s") else None, words[:-2] if words.endswith("es") else None):
        if candidate in classes:
            return candidate
    return None


def grid(value: float, margin: float) -> tuple[int, bool]:
    """The third `value` falls in, and whether it is within `margin` of a dividing line."""
    return min(int(value * 3), 2), any(abs(value - line) < margin for line in (1 / 3, 2 / 3))


def cell_name(row: int, column: int) -> str:
    if (row, column) == (1, 1):
        return "centre"
    return f"{('top', 'middle', 'bottom')[row]} {('left', 'centre', 'right')[column]}"


def judge(text: str, options: list[str], key: str, truth: list[tuple[str, tuple, bool]], classes: set[str],
          min_area: float, margin: float) -> tuple[str, str]:
    """(template, verdict: right | wrong | arguable | unknown | unjudged) of one question against COCO."""
    plain = [(label, box) for label, box, crowd in truth if not crowd]
    crowds = {label for label, _box, crowd in truth if crowd}

    def instances(label):
        return [box for name, box in plain if name == label]

    if m := re.fullmatch(r"How many (.+) are there in the image\?", text):
        label = class_of(m.group(1), classes)
        if label is None:
            return "count", "unjudged"
        if label in crowds:
            return "count", "unknown"
        boxes = instances(label)
        large = [b for b in boxes if (b[2] - b[0]) * (b[3] - b[1]) >= min_area]
        return "count", "right" if key == str(len(boxes)) else "arguable" if key == str(len(large)) else "wrong"
    if m := re.fullmatch(r"In which part of the image (?:is|are) the (.+)\?", text):
        label = class_of(m.group(1), classes)
        boxes = instances(label) if label else []
        if len(boxes) != 1:
            return "location", "wrong" if label else "unjudged"
        x1, y1, x2, y2 = boxes[0]
        (column, near_x), (row, near_y) = grid((x1 + x2) / 2, margin), grid((y1 + y2) / 2, margin)
        if key == cell_name(row, column):
            return "location", "right"
        return "location", "arguable" if near_x or near_y else "wrong"
    if m := re.fullmatch(r"Where (?:is|are) the (.+) relative to the (.+)\?", text):
        a, b = class_of(m.group(1), classes), class_of(m.group(2), classes)
        if a is None or b is None:
            return "spatial", "unjudged"
        boxes_a, boxes_b = instances(a), instances(b)
        if len(boxes_a) != 1 or len(boxes_b) != 1 or a == b:
            return "spatial", "wrong"
        (ax1, ay1, ax2, ay2), (bx1, by1, bx2, by2) = boxes_a[0], boxes_b[0]
        where = RELATION_WORDS.get(key)
        apart = {"left": ax2 <= bx1, "right": bx2 <= ax1, "above": ay2 <= by1, "below": by2 <= ay1}
        centres = {"left": ax1 + ax2 < bx1 + bx2, "right": ax1 + ax2 > bx1 + bx2,
                   "above": ay1 + ay2 < by1 + by2, "below": ay1 + ay2 > by1 + by2}
        return "spatial", "right" if apart.get(where) else "arguable" if centres.get(where) else "wrong"
    if text == "Which of these can be seen in the image?":
        named = [class_of(o, classes) for o in options]
        if None in named:
            return "identity", "unjudged"
        seen = {label for label, _box, _crowd in truth}
        right = class_of(key, classes) in seen and not any(n in seen for n in named if n != class_of(key, classes))
        return "identity", "right" if right else "wrong"
    return "other", "unjudged"


def main() -> None:
    parser = arguments(__doc__, min_score=0.0, min_area=0.0033, margin=0.04, out="detector_questions")
    args = parser.parse_args()

    from benchsmith.store import Store
    from extractors.detector import coco_classes
    from filters.blind import STAGE

    truth = {Path(p["path"]).name: p["boxes"] for p in coco_truth()}
    classes = set(coco_classes())
    instances = require_shared_data("coco-mini-train", "annotations", "instances_train2017.json")
    coco128 = require_shared_data("coco128")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = user_env() | {"BENCHSMITH_WORKSPACE": str(tmp / "bench")}
        # every photo (not only the rich ones), and only the detector's boxes as facts
        (tmp / "benchsmith.yaml").write_text(yaml.safe_dump({
            "ingest": {"richness": {"enabled": False}},
            "extract": {"use": ["centernet"], "extractors": {"centernet": {"min_score": args.min_score}}
                        if args.min_score else {}},
            "generate": {"generators": ["programmatic"]}}))
        seconds = {}
        seconds["ingest"], _ = cli("ingest", str(instances), "--images", str(instances.parents[1] / "train2017"),
                                   cwd=tmp, env=env)
        seconds["ingest"] += cli("ingest", str(coco128 / "object_detection" / "config.yaml"), "--images",
                                 str(coco128), cwd=tmp, env=env)[0]
        seconds["extract"], _ = cli("extract", cwd=tmp, env=env)
        seconds["generate"], _ = cli("generate", "-g", "programmatic", cwd=tmp, env=env)
        seconds["filter"], _ = cli("filter", cwd=tmp, env=env)
        with Store(f"sqlite:///{tmp / 'bench' / 'benchsmith.db'}") as store:
            names = {i.id: Path(i.original_name).name for i in store.get_items(kind="image")}
            questions = [q for q in store.get_questions(status=None) if q.meta.get("generator") == "programmatic"]
            kept_ids = {v.subject_id for v in store.get_verdicts(stage=STAGE, subject_kind="question") if v.passed}
            detector_facts = sum(len(f) for f in store.get_facts(list(names)).values())
    asked = [q for q in questions if "dropped" not in q.meta]
    kept = [q for q in asked if q.id in kept_ids]
    verdicts: dict[str, Counter] = defaultdict(Counter)
    wrong_examples = []
    for q in kept:
        template, verdict = judge(q.text, list(q.options), q.options[q.answer], truth[names[q.item_id]], classes,
                                  args.min_area, args.margin)
        verdicts[template][verdict] += 1
        verdicts["all"][verdict] += 1
        if verdict == "wrong" and len(wrong_examples) < 15:
            wrong_examples.append({"photo": names[q.item_id], "question": q.text, "key": q.options[q.answer]})
    shares = {template: {**dict(c), "judged": (n := c["right"] + c["wrong"] + c["arguable"]),
                         "wrong_share": round(c["wrong"] / n, 3) if n else None,
                         "wrong_or_arguable_share": round((c["wrong"] + c["arguable"]) / n, 3) if n else None}
              for template, c in sorted(verdicts.items())}
    save(args.out, {
        "detector_min_score": args.min_score or "the profile's", "photos": len(names),
        "detector_objects": detector_facts, "questions_drafted": len(questions),
        "asked_after_rules": len(asked), "kept_by_blind_filter": len(kept),
        "dropped_by_rule": dict(Counter(q.meta.get("drop_rule", "?") for q in questions if "dropped" in q.meta)),
        "verdicts": shares, "wrong_examples": wrong_examples,
        "seconds": {k: round(v, 1) for k, v in seconds.items()}})


if __name__ == "__main__":
    main()
