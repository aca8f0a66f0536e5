"""Reformulating annotated datasets: `benchsmith generate -g reform` over 100,000 annotations.

The store holds images carrying task annotations exactly as `benchsmith ingest` keeps them (one
record per dataset row): VQAv2-style questions with ten answers each over a Zipf-distributed answer
vocabulary, ImageNet-style labels over 1,000 classes, five COCO-style captions per image, RefCOCO-style
referents (four per image) and OCR strings. The images themselves are not read by this stage, so they
are not written (ingest has its own benchmark). Then, as a user runs it, on the offline profile:

- `benchsmith generate -g reform` on a fresh copy of the store, `--repeats` times: wall time of the
  command (process start and MiniLM load included), questions generated per second, and the memory
  peaks of the command and the worker processes it forks (one per core by default): the sum of their
  PSS, what the run takes from the machine, which is held to the target; the sum of their RSS, which
  counts the pages they share once per process; and the command's own RSS;
- the same command again on a finished store: it must add 0 questions;
- the floor: a process doing only what no reformulation can skip (start, read every annotation into the
  distractor pools, load MiniLM, embed the pools' texts once), timed the same way; the questions of a
  run divided by it bound the rate any implementation of this stage reaches on this machine.

Targets: >= 2,000 questions/s, peak memory (summed PSS) <= 1 GB, rerun adds 0. Results: benchmarks/results/reform_throughput.json.

    .venv/bin/python benchmarks/reform_throughput.py            # 100,000 annotations, 3 repeats
    .venv/bin/python benchmarks/reform_throughput.py --quick    # 10,000 annotations, 1 repeat
"""

from __future__ import annotations

import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import BENCHSMITH, ROOT, arguments, reported, save, timed, user_env  # noqa: E402
from benchmarks.process_tree import run_sampled  # noqa: E402

SHARES = {"vqa": 0.40, "classification": 0.20, "matching": 0.15, "grounding": 0.10, "text_reading": 0.15}


def _words(rng: random.Random, n: int, letters: str = "abcdefghiklmnoprstuvw") -> list[str]:
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(out)


def _zipf(rng: random.Random, values: list[str]) -> str:
    return values[min(int(rng.paretovariate(1.1)) - 1, len(values) - 1)]


def records(n: int, seed: int = 0):
    """(image number, task record) pairs, `n` annotations in SHARES, several per image as in the datasets."""
    rng = random.Random(seed)
    objects = [w.strip() for w in (ROOT / "data" / "vocabularies" / "objects.txt").read_text().splitlines()
               if w.strip() and not w.startswith("#")]
    adjectives = _words(rng, 60)
    classes = sorted({f"{rng.choice(adjectives)} {rng.choice(objects)}" for _ in range(1400)})[:1000]
    answers = {qtype: rng.sample(objects, 120) for qtype in ("what is the", "what animal is", "what is on the",
                                                             "what is the man holding", "what sport is")}
    answers |= {"what color is the": ["red", "blue", "green", "white", "black", "yellow", "brown", "grey", "orange",
                                      "pink", "purple", "silver", "tan", "beige", "gold"],
                "how many": [str(k) for k in range(16)], "what room is": rng.sample(objects, 40)}
    strings = sorted({w.upper() for w in _words(rng, 5000, "ABCDEFGHIKLMNOPRSTUVW")})
    image = 0
    counts = {task: int(n * share) for task, share in SHARES.items()}
    counts["vqa"] += n - sum(counts.values())
    for task, count in counts.items():
        per_image = {"vqa": 4, "grounding": 4}.get(task, 1)
        for k in range(count):
            if k % per_image == 0:
                image += 1
            yield image, _record(task, k, rng, classes, answers, strings, objects)


def _record(task, k, rng, classes, answers, strings, objects) -> dict:
    if task == "vqa":
        qtype = rng.choice(sorted(answers))
        majority = _zipf(rng, answers[qtype])
        given = [majority] * rng.randint(6, 10)
        given += [_zipf(rng, answers[qtype]) for _ in range(10 - len(given))]
        fields = {"question_id": k, "question": f"{qtype.capitalize()} {rng.choice(objects)}?", "question_type": qtype,
                  "answer_type": "number" if qtype == "how many" else "other", "multiple_choice_answer": majority,
                  "answers": [{"answer": a, "answer_confidence": "yes", "answer_id": i + 1} for i, a in enumerate(given)]}
        return {"task": "vqa", "dataset": "vqav2", "row": f"vqa[{k}]", "fields": fields}
    if task == "classification":
        return {"task": "classification", "dataset": "imagenet", "row": f"in[{k}]",
                "fields": {"label": _zipf(rng, classes) if k % 2 else rng.choice(classes), "id": f"val_{k:08d}"}}
    if task == "matching":
        who, what, where = rng.choice(objects), rng.choice(objects), rng.choice(objects)
        sentences = [f"a {who} next to a {what} near the {where}", f"the {who} and a {what} by a {where}",
                     f"a {who} with a {what}", f"there is a {who} near a {where}", f"a {what} beside a {who}"]
        return {"task": "matching", "dataset": "coco", "row": f"coco[{k}]", "fields": {"cocoid": k, "sentences": sentences}}
    if task == "grounding":
        x, y = (k % 4) % 2 * 320, (k % 4) // 2 * 240
        label = rng.choice(objects[:20])
        return {"task": "grounding", "dataset": "refcoco", "row": f"ref[{k}]",
                "fields": {"ref_id": k, "category_id": label, "bbox": [x + 10.0, y + 10.0, 280.0, 200.0],
                           "sentences": [{"raw": f"the {label} on the {['left', 'right'][k % 2]}", "sent_id": k}]}}
    return {"task": "text_reading", "dataset": "textocr", "row": f"ocr[{k}]",
            "fields": {"id": f"t{k}", "text": rng.choice(strings)}}


def build_store(db_url: str, n: int) -> int:
    from benchsmith.records import Image
    from benchsmith.store import Store

    items: dict[int, list[dict]] = {}
    for image, record in records(n):
        items.setdefault(image, []).append(record)
    with Store(db_url) as store:
        batch = []
        for image, found in items.items():
            batch.append(Image(id=f"{image:064x}", path=f"{image:064x}.png", width=640, height=480,
                               source=found[0]["dataset"], annotations={"reform": found}))
            if len(batch) == 5000:
                store.add_items(batch)
                batch = []
        store.add_items(batch)
    return len(items)


def _timed_cli(*args: str, cwd: Path, env: dict) -> tuple[float, dict, str]:
    """Wall seconds, memory peaks and the output of one CLI command. Peaks: the command's own RSS (GNU
    time), and summed over it and the workers it forks (`process_tree`): RSS, which counts the pages
    they share once per process, and PSS, which counts each page once."""
    wall, tree_peaks, out, err, code = run_sampled(["/usr/bin/time", "-f", "MAXRSS_KB %M", BENCHSMITH, *args],
                                                   cwd=cwd, env=env | {"COLUMNS": "200"})
    if code != 0:
        raise RuntimeError(f"benchsmith {' '.join(args)} failed:\n{out}\n{err}")
    own = int(re.search(r"MAXRSS_KB (\d+)", err).group(1)) / 1024
    return wall, {"main_rss_mb": round(own, 1), "tree_pss_mb": tree_peaks["pss"], "tree_rss_mb": tree_peaks["rss"],
                  "processes": tree_peaks["processes"] - 1}, out  # less GNU time itself


FLOOR = """
import sys, time
from benchsmith.settings import load_settings
from benchsmith.store import Store
from generators.reform.pools import Pools
from generators.stage import GenerateSettings

options = load_settings().section("generate", GenerateSettings).reform
with Store(sys.argv[1]) as store:
    pools = Pools(store.iter_items(kind="image"), options)
texts = sorted({text for pool in pools.pools.values() for text in pool})
started = time.perf_counter()
pools.embeddings.add(texts)
print("EMBEDDED", len(texts), time.perf_counter() - started)
"""


def floor(db_url: str, env: dict) -> dict:
    """Wall time and peak RSS of the unavoidable part alone (see the module's docstring)."""
    command = ["/usr/bin/time", "-f", "MAXRSS_KB %M", sys.executable, "-c", FLOOR, db_url]
    wall, done = timed(lambda: subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600))
    if done.returncode != 0:
        raise RuntimeError(f"the floor run failed:\n{done.stdout}\n{done.stderr}")
    texts, embed_s = re.search(r"EMBEDDED (\d+) ([\d.]+)", done.stdout).groups()
    return {"seconds": round(wall, 2), "embedded_texts": int(texts), "minilm_load_and_embed_s": round(float(embed_s), 2),
            "peak_rss_mb": round(int(re.search(r"MAXRSS_KB (\d+)", done.stderr).group(1)) / 1024, 1)}


def _count(name: str, printed: str) -> int:
    return int(reported(printed, name))


def run(n: int = 100_000, repeats: int = 3) -> dict:
    env = user_env("OPENAI")
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template"
        template.mkdir()
        setup, images = timed(lambda: build_store(f"sqlite:///{template / 'benchsmith.db'}", n))
        runs = []
        for repeat in range(repeats):
            workdir = Path(tmp) / f"run{repeat}"
            work_env = env | {"BENCHSMITH_WORKSPACE": str(shutil.copytree(template, workdir / "bench"))}
            wall, peaks, printed = _timed_cli("generate", "-g", "reform", cwd=workdir, env=work_env)
            generated = _count("generated", printed)
            runs.append({"seconds": round(wall, 2), "questions": generated,
                         "questions_per_s": round(generated / wall, 1), **peaks,
                         **{name: _count(name, printed) for name in ("jobs", "kept", "new_questions")}})
        rerun_wall, rerun_peaks, printed = _timed_cli("generate", "-g", "reform", cwd=workdir, env=work_env)
        rerun = {"seconds": round(rerun_wall, 2), "jobs": _count("jobs", printed),
                 "new_questions": _count("new_questions", printed), **rerun_peaks}
        floors = [floor(f"sqlite:///{template / 'benchsmith.db'}", env) for _ in range(repeats)]
    questions = statistics.median(r["questions"] for r in runs)
    floor_s = statistics.median(f["seconds"] for f in floors)
    speed = statistics.median(r["questions_per_s"] for r in runs)
    peak_mb = max(r["tree_pss_mb"] for r in runs)
    return {"annotations": n, "images": images, "shares": SHARES, "store_setup_s": round(setup, 1),
            "repeats": runs, "median_seconds": statistics.median(r["seconds"] for r in runs),
            "median_questions_per_s": speed, "max_tree_pss_mb": peak_mb,
            "max_tree_rss_mb": max(r["tree_rss_mb"] for r in runs),
            "max_main_rss_mb": max(r["main_rss_mb"] for r in runs), "rerun": rerun,
            "floor": {"repeats": floors, "median_seconds": floor_s,
                      "questions_per_s_bound": round(questions / floor_s, 1)},
            "targets": {"questions_per_s": 2000, "peak_memory_mb": 1024, "rerun_new_questions": 0},
            "meets_targets": speed >= 2000 and peak_mb <= 1024 and rerun["new_questions"] == 0,
            "cpus": os.cpu_count()}


if __name__ == "__main__":
    args = arguments(__doc__, {"annotations": 10_000, "repeats": 1}, annotations=100_000, repeats=3).parse_args()
    save("reform_throughput", run(args.annotations, args.repeats))
