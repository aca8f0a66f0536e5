"""How fast are text-rich pages rendered, and how much of their text does RapidOCR read?

- throughput: `benchsmith scenes make --kind K --n N --workers W` for chart, table, document, map and web,
  timed from outside (process start included) and per page once started (the same command with --n 1
  gives the start-up cost, subtracted); medians of `repeats` runs, after one untimed run that writes the
  bytecode cache. Targets on a 2-core machine: >= 20 chart or table pages per second, >= 3 web pages per
  second (each worker starts one Chromium and keeps it).
- word accuracy: per kind (and per chart type or page layout), the share of drawn words (the manifest's
  OCR lines, split on spaces, compared case-insensitively, each read word used once) that RapidOCR reads
  on the rendered image. Target: >= 0.95 per kind.
The load average at the start is recorded: other work on the machine slows rendering down.
Results: benchmarks/results/textrich.json.

    .venv/bin/python benchmarks/textrich.py            # 200 pages per kind, 60 per kind read, 3 runs
    .venv/bin/python benchmarks/textrich.py --quick    # 40 and 15, 1 run
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, cli, save, timed, user_env  # noqa: E402

KINDS = ("chart", "table", "document", "map", "web")


def _make(out: Path, kind: str, n: int, workers: int) -> float:
    return cli("scenes", "make", "--kind", kind, "--n", str(n), "--out", str(out), "--workers", str(workers),
               "--seed", "7", cwd=out.parent, env=user_env())[0]


def throughput(tmp: Path, n: int, workers: int, repeats: int) -> dict:
    out = {}
    _make(tmp / "warm", "mix", 3, 1)
    for kind in KINDS:
        start_up, _ = timed(lambda: _make(tmp / f"{kind}-one", kind, 1, workers), repeats)
        seconds, _ = timed(lambda: _make(tmp / f"{kind}-{workers}", kind, n, workers), repeats)
        out[kind] = {"pages": n, "workers": workers, "runs": repeats, "seconds": round(seconds, 2),
                     "start_up_seconds": round(start_up, 2),
                     "pages_per_second": round(n / seconds, 1),
                     "pages_per_second_once_started": round(n / max(seconds - start_up, 1e-9), 1)}
    return out


def word_accuracy(tmp: Path, n: int) -> dict:
    from benchsmith.images import open_rgb
    from benchsmith.records import Image
    from benchsmith.settings import load_settings
    from extractors.base import Loaded, build_extractors

    extractor, = build_extractors(load_settings(profile="local"), only=["rapidocr"])
    extractor.load()
    out = {}
    for kind in KINDS:
        folder = tmp / f"{kind}-read"
        _make(folder, kind, n, 2)
        totals: dict[str, Counter] = defaultdict(Counter)
        missed: Counter = Counter()
        for line in (folder / "manifest.jsonl").read_text().splitlines():
            row = json.loads(line)
            image = open_rgb(folder / row["path"])
            facts, = extractor.extract([Loaded(Image(id=row["path"], path=row["path"], width=image.width,
                                                     height=image.height), image)])
            read = Counter(w.casefold() for f in facts for w in f.text.split())
            true = Counter(w.casefold() for ocr in row["ocr"] for w in ocr["text"].split())
            variant = row["truth"].get("chart") or row["truth"].get("layout", kind)
            for group in (kind, f"{kind}:{variant}"):
                totals[group].update(words=sum(true.values()), found=sum((true & read).values()))
            missed.update(true - read)
        for group, t in sorted(totals.items()):
            out[group] = {"words": t["words"], "word_accuracy": round(t["found"] / max(t["words"], 1), 4)}
        out[kind]["most_missed"] = dict(missed.most_common(8))
    return out


def run(render: int, read: int, workers: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        result = {"case": "textrich", "cores": os.cpu_count(), "load_average": os.getloadavg()[0],
                  "throughput": throughput(tmp, render, workers, repeats), "rapidocr": word_accuracy(tmp, read)}
    result["load_average_after"] = os.getloadavg()[0]
    result["meets_target"] = (max(result["throughput"][k]["pages_per_second"] for k in ("chart", "table")) >= 20
                              and result["throughput"]["web"]["pages_per_second"] >= 3
                              and all(result["rapidocr"][k]["word_accuracy"] >= 0.95 for k in KINDS))
    return result


if __name__ == "__main__":
    args = arguments(__doc__, quick={"render": 40, "read": 15}, render=200, read=60, workers=2,
                     repeats=3).parse_args()
    save("textrich", run(args.render, args.read, args.workers, args.repeats))
