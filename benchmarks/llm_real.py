"""LLM-written questions on real photos with a real local model (Qwen2.5-Coder-1.5B at 1 thread by default).

COCO photos of ../shared/data/coco-mini-train enter the store with their COCO boxes (crowd regions marked)
and two captions each as supplied facts; `generate -g llm` writes questions through the local llama.cpp
server; then, per question: whether the reply was schema-valid, the fact check's verdict, the quality
gate's, a blind filter of the offline solvers plus the real LLM as chat solver, and a second LLM judge
(the same model, solving the question from the facts without being shown the key; it approves the key
when it picks it). This file's own oracle judges each question right, wrong or undecided against COCO
truth (every instance, crowd regions as unknown counts). What is kept follows a fact-check policy
(`--keep`, as `generate.llm.fact_check.keep`: confirmed, the local-llm profile's, or unrefuted); both are
reported. `--candidates 1` (the default, as the local-llm profile) puts the answers the facts settle into
each prompt (`generate.llm.candidates`), and the key is the option a fitting candidate makes true (the
model's own letter is judged too); `--candidates 0` measures the prompt without them.
`--shown-key-judge N` also asks N decided drafts the first judge's way (the key shown, a bare true/false),
which said "incorrect" to everything.

    .venv/bin/python benchmarks/llm_real.py [--images 3] [--model qwen2.5-coder-1.5b] [--keep confirmed]

A call took about 4 minutes on the shared 2-core machine under load (a ~1,700-token prompt at 1 thread),
so the default run is small: 3 photos x 4 dimensions.
    -> benchmarks/results/llm_real.json
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import arguments, save  # noqa: E402
from benchsmith import llm_server  # noqa: E402
from benchsmith.dimensions import registry  # noqa: E402
from benchsmith.llm import LlmClient, LlmOptions, LlmRequest  # noqa: E402
from benchsmith.records import LETTERS, Fact, Image, Provenance, Question  # noqa: E402
from benchsmith.settings import load_settings  # noqa: E402
from benchsmith.store import Store  # noqa: E402
from generators import fact_check  # noqa: E402
from tests.support.shared_data import shared_data_dir  # noqa: E402

DIMENSIONS = ["instances_counting", "instance_identity", "instance_location", "spatial_relation"]
NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def coco(folder: Path, n: int, most: int) -> list[dict]:
    """The first `n` photos (by id) with 2 to `most` objects: size, objects (label, unit box, crowd), captions.
    Few objects keep the prompt short: a call's time at 1 thread is mostly the prompt."""
    instances = json.loads((folder / "annotations" / "instances_train2017.json").read_text())
    captions = json.loads((folder / "annotations" / "captions_train2017.json").read_text())
    names = {c["id"]: c["name"] for c in instances["categories"]}
    said = defaultdict(list)
    for c in captions["annotations"]:
        said[c["image_id"]].append(c["caption"].strip())
    objects = defaultdict(list)
    for a in instances["annotations"]:
        objects[a["image_id"]].append(a)
    photos = []
    for image in sorted(instances["images"], key=lambda i: i["id"]):
        w, h = image["width"], image["height"]
        found = [{"label": names[a["category_id"]], "crowd": bool(a["iscrowd"]),
                  "box": (a["bbox"][0] / w, a["bbox"][1] / h, min(1, (a["bbox"][0] + a["bbox"][2]) / w),
                          min(1, (a["bbox"][1] + a["bbox"][3]) / h))} for a in objects[image["id"]]]
        if 2 <= len(found) <= most:
            photos.append({"id": f"coco-{image['id']}", "file": image["file_name"], "width": w, "height": h,
                           "objects": found, "captions": sorted(said[image["id"]])[:2]})
        if len(photos) == n:
            break
    return photos


# -- the oracle: this benchmark's own reading of a question against COCO truth ---------------------

def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def named(text: str, labels: set[str]) -> list[str]:
    """Labels the text names (singular or a plain plural), longest first, each span once, in text order."""
    padded, hits = " " + " ".join(words(text)) + " ", []
    for label in sorted(labels, key=len, reverse=True):
        forms = (label, label + "s", label + "es", label[:-1] + "ies" if label.endswith("y") else label,
                 *(["people"] if label == "person" else []))
        for form in forms:
            at = padded.find(f" {form} ")
            if at >= 0 and not any(s <= at < e for s, e, _ in hits):
                hits.append((at, at + len(form) + 1, label))
                break
    return [label for *_span, label in sorted(hits)]


def oracle(question, dimension: str, photo: dict) -> str:
    """right, wrong or undecided."""
    objects = photo["objects"]
    labels = {o["label"] for o in objects}
    key = question.options[question.answer]
    of = lambda label: [o for o in objects if o["label"] == label]  # noqa: E731
    centre = lambda o: ((o["box"][0] + o["box"][2]) / 2, (o["box"][1] + o["box"][3]) / 2)  # noqa: E731
    if dimension == "instances_counting":
        asked = named(question.text, labels | COCO_LABELS)
        number = words(key)
        if len(asked) != 1 or len(number) != 1:
            return "undecided"
        n = int(number[0]) if number[0].isdigit() else NUMBERS.index(number[0]) if number[0] in NUMBERS else None
        if n is None or any(o["crowd"] for o in of(asked[0])):
            return "undecided"
        return "right" if n == len(of(asked[0])) else "wrong"
    if dimension == "instance_identity":
        options = [named(o, COCO_LABELS) for o in question.options]
        if len(options[question.answer]) != 1:
            return "undecided"
        if options[question.answer][0] not in labels:
            return "wrong"
        others = [o for i, o in enumerate(options) if i != question.answer and o and o[0] in labels]
        return "wrong" if others else "right"
    if dimension == "instance_location":
        asked = named(question.text, labels)
        if len(asked) != 1 or len(of(asked[0])) != 1:
            return "undecided"
        x, y = centre(of(asked[0])[0])
        said = words(key)
        row = {"top": 0, "upper": 0, "middle": 1, "bottom": 2, "lower": 2}
        col = {"left": 0, "centre": 1, "center": 1, "right": 2}
        r = next((row[w] for w in said if w in row), None)
        c = next((col[w] for w in said if w in col), None)
        if said in (["centre"], ["center"], ["middle"]):
            r = c = 1
        if r is None and c is None:
            return "undecided"
        third = lambda v: min(int(v * 3), 2)  # noqa: E731
        return "right" if (r is None or r == third(y)) and (c is None or c == third(x)) else "wrong"
    if dimension == "spatial_relation":
        def where(a, b):  # where a's centre is from b's, along the axis they differ most on
            (ax, ay), (bx, by) = centre(of(a)[0]), centre(of(b)[0])
            return ("left" if ax < bx else "right") if abs(ax - bx) >= abs(ay - by) else ("above" if ay < by else "below")
        asked = named(question.text, labels)
        said = [w for w in words(key) if w in ("left", "right", "above", "below")]
        if len(said) == 1:
            if len(asked) != 2 or any(len(of(a)) != 1 for a in asked):
                return "undecided"
            return "right" if where(*asked) == said[0] else "wrong"
        direction = [w for w in words(question.text) if w in ("left", "right", "above", "below")]
        keyed = named(key, labels)
        if len(direction) != 1 or len(asked) != 1 or len(keyed) != 1 or any(len(of(a)) != 1 for a in asked + keyed):
            return "undecided"
        others = [n for i, o in enumerate(question.options) if i != question.answer for n in named(o, labels)
                  if len(of(n)) == 1 and n != asked[0] and where(n, asked[0]) == direction[0]]
        return "right" if where(keyed[0], asked[0]) == direction[0] and not others else "wrong"
    return "undecided"


COCO_LABELS: set[str] = set()


JUDGE_SYSTEM = ("You check multiple-choice questions about a photo that you cannot see, using only the facts "
                "listed about it. A box is [left, top, right, bottom] in fractions of the image's width and "
                "height: x grows to the right, y grows downwards.")


def judge_request(question, facts_text: str, model: str) -> LlmRequest:
    """The second judge solves the question from the facts, its reasons first, without being shown the key
    (a small model shown a proposed answer and asked for a bare true/false said false to everything); it
    approves the key when its own answer is the key. "none" is its way to say no option (or more than one)
    follows from the facts."""
    options = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(question.options))
    prompt = (f"Facts about the photo:\n{facts_text}\n\nQuestion: {question.text}\n{options}\n\n"
              "Which option do the facts make right? Reason in one or two short sentences, then give its "
              'letter, or "none" when no option or more than one follows from the facts.')
    schema = {"type": "object", "properties": {"reason": {"type": "string", "maxLength": 200},
                                               "answer": {"type": "string", "enum": [*LETTERS, "none"]}},
              "required": ["reason", "answer"], "additionalProperties": False}
    return LlmRequest(purpose="judge", model=model, temperature=0.0, max_tokens=100,
                      messages=[{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": prompt}],
                      response_format={"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}})


def shown_key_request(question, facts_text: str, model: str) -> LlmRequest:
    """The first judge's design, kept to measure it: the proposed key shown, a bare true/false asked."""
    options = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(question.options))
    prompt = (f"Facts about a photo (from annotations):\n{facts_text}\n\nQuestion: {question.text}\n{options}\n"
              f"Proposed answer: {LETTERS[question.answer]}. Using only the facts, is the proposed answer correct?")
    schema = {"type": "object", "properties": {"correct": {"type": "boolean"}}, "required": ["correct"],
              "additionalProperties": False}
    return LlmRequest(purpose="judge", model=model, temperature=0.0, max_tokens=16,
                      messages=[{"role": "user", "content": prompt}],
                      response_format={"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}})


def judge_approves(question, parsed: dict) -> bool:
    return parsed["answer"] == LETTERS[question.answer]


ASKS = {"instances_counting": "How many {} are in the image?", "instance_identity": "Which of these is in the image?",
        "instance_location": "In which part of the image is the {}?",
        "spatial_relation": "Where is the {} relative to the {}?"}


def candidates_vs_oracle(photos: list[dict], facts: dict, settings, dimensions: list[str]) -> dict:
    """Each answer candidate the prompts hold (`generate.llm.candidates`), asked as the template words it
    and keyed by its true value: how the oracle and the fact check judge it, without the model."""
    from generators.llm import answer_candidates
    from generators.stage import GenerateSettings

    own = settings.section("generate", GenerateSettings).part("llm")
    own = own.model_copy(update={"candidates": own.candidates.model_copy(update={"enabled": True})})
    tally: Counter = Counter()
    for p in photos:
        image = Image(id=p["id"], path=p["file"], width=p["width"], height=p["height"])
        for key in (k for k in dimensions if k in ASKS):
            for c in answer_candidates(image, facts[p["id"]], registry().get(key), own) or []:
                q = Question(item_id=p["id"], dimension_id=1, text=ASKS[key].format(*c.subject),
                             options=[c.true, *c.false], answer=0, provenance=Provenance(backend="candidates"))
                tally[f"{key}: oracle {oracle(q, key, p)}, fact check {fact_check.verdict(q, key, facts[p['id']])}"] += 1
    return dict(sorted(tally.items()))


def main() -> None:
    args = arguments(__doc__, quick={"images": 3}, images=3, most_objects=6, model="qwen2.5-coder-1.5b", port=18791, threads=1,
                     questions_per_call=2, max_tokens=400, keep="confirmed", candidates=1, shown_key_judge=0, dimensions=DIMENSIONS,
                     models_dir=str(Path.home() / ".cache" / "benchsmith" / "models"), workspace="").parse_args()
    folder = shared_data_dir() / "coco-mini-train"
    instances = json.loads((folder / "annotations" / "instances_train2017.json").read_text())
    COCO_LABELS.update(c["name"] for c in instances["categories"])
    photos = coco(folder, args.images, args.most_objects)
    by_id = {p["id"]: p for p in photos}
    # --workspace DIR: a run's store again, its calls answered from the call cache (analysis changes only)
    workspace = Path(args.workspace) if args.workspace else Path(tempfile.mkdtemp(prefix="llm_real-"))
    env = {"BENCHSMITH_WORKSPACE": str(workspace), "OPENAI_BASE_URL": f"http://127.0.0.1:{args.port}/v1",
           "BENCHSMITH__LLM_SERVER__MODEL": args.model, "BENCHSMITH__LLM_SERVER__PORT": str(args.port),
           "BENCHSMITH__LLM_SERVER__THREADS": str(args.threads), "BENCHSMITH__LLM_SERVER__MODELS_DIR": args.models_dir,
           "BENCHSMITH__GENERATE__DIMENSIONS": f"[{', '.join(args.dimensions)}]",
           "BENCHSMITH__GENERATE__LLM__MODEL": args.model, "BENCHSMITH__GENERATE__LLM__MODELS": "{}",
           "BENCHSMITH__GENERATE__LLM__QUESTIONS_PER_CALL": str(args.questions_per_call),
           "BENCHSMITH__GENERATE__LLM__MAX_TOKENS": str(args.max_tokens),
           "BENCHSMITH__GENERATE__LLM__CANDIDATES__ENABLED": str(bool(args.candidates)).lower(),
           "BENCHSMITH__GENERATE__LLM__OPTIONS": "{concurrency: 1, timeout_s: 600, deadline_s: 1200}"}
    settings = load_settings(env=env)
    result: dict = {"model": args.model, "threads": args.threads, "images": len(photos), "dimensions": args.dimensions,
                    "questions_per_call": args.questions_per_call, "candidates": bool(args.candidates), "data": "coco-mini-train (COCO boxes + 2 captions)"}
    started = time.monotonic()
    llm_server.start_detached(settings)
    result["server_start_s"] = round(time.monotonic() - started, 1)
    try:
        from generators.stage import run_generate

        with Store(settings.db_url) as store:
            supplied = Provenance(backend="supplied")
            store.add_items([Image(id=p["id"], path=str(folder / "train2017" / p["file"]), width=p["width"],
                                   height=p["height"]) for p in photos])
            # a reused workspace (--workspace) with more --images: facts for the photos it lacks
            stored = store.get_facts([p["id"] for p in photos])
            new = [p for p in photos if not stored.get(p["id"])]
            if new:
                store.add_facts("supplied", [
                    *(Fact(item_id=p["id"], kind="object", text=o["label"], box=o["box"], provenance=supplied,
                           attributes={"crowd": "true"} if o["crowd"] else {}) for p in new for o in p["objects"]),
                    *(Fact(item_id=p["id"], kind="caption", text=c, provenance=supplied) for p in new for c in p["captions"])])
            t0 = time.monotonic()
            report = run_generate(store, settings, generators=["llm"])
            generate_s = time.monotonic() - t0
            # from the store, so a rerun on the same workspace (--workspace) reports the first run's figures
            ledger = store.ledger_rows("generate:llm")
            failed = sum(r["status"] == "failed" for r in ledger)
            result["generate"] = {"jobs": len(ledger), "failed_drafts": failed, "this_run": {
                k: report[k] for k in ("jobs", "llm_requests", "kept") if k in report} | {"seconds": round(generate_s, 1)}}
            result["schema_valid_share"] = round(1 - failed / len(ledger), 4) if ledger else None
            save("llm_real", result)

            # a workspace reused with fewer --images still holds the others: only these photos are analysed
            # (and not those a changed setting superseded: a rerun on the same workspace redoes them)
            questions = [q for q in store.get_questions() if q.item_id in by_id and q.status != "superseded"]
            calls = store.get_llm_calls(sorted({q.provenance.params["llm_call"] for q in questions}))
            result["generate"]["call_seconds"] = round(sum(c["seconds"] or 0 for c in calls.values()), 1)
            dims = {registry().get(k).id: k for k in args.dimensions}
            verdicts = {v.subject_id: v for v in store.get_verdicts(passed=False)}
            facts = store.get_facts(sorted(by_id))
            result["candidates_vs_oracle"] = candidates_vs_oracle(photos, facts, settings, args.dimensions)
            rows = []
            for q in questions:
                dimension = dims[q.dimension_id]
                verdict = verdicts.get(q.id)
                # the fact check as the code stands (the stored meta is the one of the run that wrote it)
                said = fact_check.verdict(q, dimension, facts[q.item_id])
                # the oracle on the model's own letter too, where the key came from the candidates instead
                own = q.model_copy(update={"answer": q.options.index(q.meta["model_key"])}) if "model_key" in q.meta else q
                rows.append({"q": q, "dimension": dimension, "oracle": oracle(q, dimension, by_id[q.item_id]),
                             "oracle_model_letter": oracle(own, dimension, by_id[q.item_id]),
                             "rekeyed": q.meta.get("key_from") == "candidates" and own.answer != q.answer,
                             "fact_check": said if said == "verified" or said.startswith("unchecked") else "failed",
                             "fact_check_reason": said,
                             "gate": verdict.rule if verdict and verdict.rule != "fact_check" else ""})
            # the blind filter: offline solvers and the real LLM as a chat solver, on every question
            from filters.blind import BlindSettings, solvers_from
            from filters.solvers import Query
            blind = BlindSettings.model_validate({"max_right": 0, "solvers": [
                {"kind": "longest", "tie_margin": 0.5}, {"kind": "overlap"}, {"kind": "odd_one_out", "tie_margin": 0.2},
                {"kind": "centroid", "tie_margin": 0.15},
                {"kind": "openai", "model": args.model, "llm": {"concurrency": 1, "timeout_s": 600, "deadline_s": 1200}}]})
            t0 = time.monotonic()
            queries = [Query(r["q"].text, tuple(r["q"].options)) for r in rows]
            for solver in solvers_from(blind, settings=settings, store=store):
                for r, p in zip(rows, solver.answer(queries)):
                    r.setdefault("solvers", {})[solver.name] = None if p is None else int(p.choice == r["q"].answer)
            result["blind_seconds_this_run"] = round(time.monotonic() - t0, 1)
            chat = next(x for x in solvers_from(blind, settings=settings, store=store) if x.name.startswith("openai"))
            solved = store.get_llm_calls([chat.request(q).key for q in queries])
            result["chat_solver_call_seconds"] = round(sum(c["seconds"] or 0 for c in solved.values()), 1)
            # a second LLM judge with the facts
            client = LlmClient(settings, LlmOptions(concurrency=1, timeout_s=600, deadline_s=1200), store=store)
            facts_of = {p["id"]: "\n".join([*(f"- object: {o['label']} box {[round(v, 2) for v in o['box']]}"
                                              for o in p["objects"]), *(f"- caption: {c}" for c in p["captions"])])
                        for p in photos}
            t0 = time.monotonic()
            # only where the oracle decides (agreement and catches are counted there), a photo's questions
            # together, so the server's prompt cache holds the facts block between them
            to_judge = sorted((r for r in rows if r["oracle"] != "undecided"), key=lambda r: r["q"].item_id)
            asked = [judge_request(r["q"], facts_of[r["q"].item_id], args.model) for r in to_judge]
            answers = client.run(asked)
            result["judge_seconds_this_run"] = round(time.monotonic() - t0, 1)
            judged = store.get_llm_calls([a.key for a in asked])
            result["judge_call_seconds"] = round(sum(c["seconds"] or 0 for c in judged.values()), 1)
            result["judge_schema_valid"] = sum(a.ok for a in answers)
            for r in rows:
                r["judge"] = r["judge_said"] = None
            for r, a in zip(to_judge, answers):
                r["judge"] = None if not a.ok else judge_approves(r["q"], a.parsed)
                r["judge_said"] = a.parsed if a.ok else a.reason
            if args.shown_key_judge:  # the first judge's design on some decided drafts, to show why it failed
                sample = [r for r in to_judge if r["oracle"] == "right"][:args.shown_key_judge // 2]
                sample += [r for r in to_judge if r["oracle"] == "wrong"][:args.shown_key_judge - len(sample)]
                said = client.run([shown_key_request(r["q"], facts_of[r["q"].item_id], args.model) for r in sample])
                result["shown_key_judge"] = {
                    "design": "the key shown, a bare true/false in 16 tokens", "n": len(sample),
                    "says_correct_on_right": f'{sum(a.ok and a.parsed["correct"] for r, a in zip(sample, said) if r["oracle"] == "right")}'
                                             f'/{sum(r["oracle"] == "right" for r in sample)}',
                    "says_correct_on_wrong": f'{sum(a.ok and a.parsed["correct"] for r, a in zip(sample, said) if r["oracle"] == "wrong")}'
                                             f'/{sum(r["oracle"] == "wrong" for r in sample)}',
                    "solving_judge_on_the_same": f'{sum(bool(r["judge"]) == (r["oracle"] == "right") for r in sample)}/{len(sample)} agree with the oracle'}
    finally:
        llm_server.stop(settings)

    chat = next(name for name in rows[0]["solvers"] if name.startswith("openai")) if rows else "openai"
    for r in rows:
        r["blind_drop"] = any(v == 1 for v in r["solvers"].values())
        r["passed_checks"] = r["fact_check"] != "failed" and not r["gate"]
    wrong = [r for r in rows if r["oracle"] == "wrong"]
    tally = lambda rs: dict(Counter(r["oracle"] for r in rs))  # noqa: E731
    share = lambda rs, verdict: round(sum(r["oracle"] == verdict for r in rs) / len(rs), 3) if rs else None  # noqa: E731
    # what each keep policy of the fact check (generate.llm.fact_check.keep) keeps after the gate and the blind filter
    policies = {"unrefuted": lambda r: True, "confirmed": lambda r: r["fact_check"] == "verified"}
    kept_by = {name: [r for r in rows if r["passed_checks"] and not r["blind_drop"] and keeps(r)]
               for name, keeps in policies.items()}
    kept = kept_by[args.keep]
    judged = [r for r in rows if r["judge"] is not None and r["oracle"] != "undecided"]
    result |= {
        "questions": len(rows), "oracle_all": tally(rows),
        "oracle_all_with_the_models_letters": dict(Counter(r["oracle_model_letter"] for r in rows)),
        "keyed_by_candidates": sum(r["q"].meta.get("key_from") == "candidates" for r in rows),
        "letter_changed_by_candidates": sum(r["rekeyed"] for r in rows), "by_dimension": {
            d: tally([r for r in rows if r["dimension"] == d]) for d in args.dimensions},
        "fact_check": dict(Counter(r["fact_check"].split(":")[0] for r in rows)),
        "fact_check_vs_oracle": {v: tally([r for r in rows if r["fact_check"].split(":")[0] == v])
                                 for v in ("verified", "failed", "unchecked")},
        "wrong_drafts": len(wrong),
        "wrong_caught_by": {"fact_check": sum(r["fact_check"] == "failed" for r in wrong),
                            "fact_check_confirmed_only": sum(r["fact_check"] != "verified" for r in wrong),
                            "quality_gate": sum(bool(r["gate"]) for r in wrong),
                            "blind_filter": sum(r["blind_drop"] for r in wrong),
                            "second_llm_judge": sum(r["judge"] is False for r in wrong)},
        "right_rejected_by_judge": sum(r["judge"] is False for r in rows if r["oracle"] == "right"),
        "second_judge_vs_oracle": {
            "decided_by_both": len(judged),
            "agreement": round(sum(r["judge"] == (r["oracle"] == "right") for r in judged) / len(judged), 3) if judged else None,
            "approves_right": f'{sum(r["judge"] for r in judged if r["oracle"] == "right")}/{sum(r["oracle"] == "right" for r in judged)}',
            "rejects_wrong": f'{sum(not r["judge"] for r in judged if r["oracle"] == "wrong")}/{sum(r["oracle"] == "wrong" for r in judged)}',
            "approves_share": round(sum(r["judge"] for r in judged) / len(judged), 3) if judged else None},
        "keep_policy": args.keep,
        "kept_by_policy": {name: {"kept": len(rs), "oracle": tally(rs), "right_share": share(rs, "right"),
                                  "wrong_share": share(rs, "wrong")} for name, rs in kept_by.items()},
        "kept": len(kept), "kept_oracle": tally(kept),
        "kept_right_share": share(kept, "right"), "kept_wrong_share": share(kept, "wrong"),
        "seconds_per_kept_question": round(result["generate"]["call_seconds"] / len(kept), 1) if kept else None,
        "blind_solvers_accuracy": {
            name: {"on_kept_by_blind": _acc([r["solvers"][name] for r in rows if not r["blind_drop"]]),
                   "on_dropped_by_blind": _acc([r["solvers"][name] for r in rows if r["blind_drop"]])}
            for name in (rows[0]["solvers"] if rows else {})},
        "chat_solver": chat,
        "examples": [{"dimension": r["dimension"], "text": r["q"].text, "options": r["q"].options,
                      "key": r["q"].options[r["q"].answer], "model_key": r["q"].meta.get("model_key"), "oracle": r["oracle"], "fact_check": r["fact_check_reason"],
                      "gate": r["gate"], "blind_drop": r["blind_drop"], "judge": r["judge"], "judge_said": r.get("judge_said")} for r in rows],
        "total_seconds": round(time.monotonic() - started, 1)}
    save("llm_real", result)
    print(json.dumps({k: v for k, v in result.items() if k != "examples"}, indent=1))


def _acc(values: list) -> dict:
    answered = [v for v in values if v is not None]
    return {"n": len(values), "right": sum(answered), "accuracy": round(sum(answered) / len(answered), 3) if answered else None}


if __name__ == "__main__":
    main()
