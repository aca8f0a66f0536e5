"""A build over mixed text-rich pages, as a user runs it: how many questions survive, per dimension and
per family, are their answer letters balanced, and how far above chance can a text-only model get?

The installed command, in one workspace: `scenes make --kind mix` (every installed renderer in turn),
`ingest`, `extract` and `filter` with the local profile, `generate -g textrich`; each step timed. Then,
over the questions the blind filter judged and kept, per dimension, per dimension group and per family
(charts; tables and documents; maps; web, by the kind of page a question is about):
- kept questions (target >= 250 per family);
- answer letters (chi-square against uniform; target p > 0.05 overall and per family);
- the strongest text-only adversary of benchmarks/blind_adversary.py trained on the kept set, 5 folds by
  page (target: upper 95% bound <= 28% overall, accuracy <= 35% in every dimension).
Also: kept questions per template and ask (`by_template`), whether each kept key is the one option the
question's words and the page's truth make right (worked out by the tests' own readers of charts, tables,
documents, maps and web pages: `keys`), and the adversary on the questions that rest on a receipt's or an
invoice's values (prices, quantities, amounts: `document_values`).
Results: benchmarks/results/textrich_build.json.

    .venv/bin/python benchmarks/textrich_build.py            # 300 pages
    .venv/bin/python benchmarks/textrich_build.py --quick    # 60 pages
    .venv/bin/python benchmarks/textrich_build.py --pages 200 --workspace DIR   # a build already made in DIR
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.blind_adversary import attack, tabulate  # noqa: E402
from benchmarks.common import arguments, cli, save, user_env  # noqa: E402

FAMILIES = {"chart": "charts", "table": "tables and documents", "document": "tables and documents",
            "map": "maps", "web": "web"}  # a plugin's kind of page is a family of its own


def build(folder: Path, pages: int, seed: int, workers: int) -> dict[str, float]:
    """The build's steps through the installed command; each one's wall seconds."""
    env = user_env("LABEL_STUDIO") | {"BENCHSMITH_WORKSPACE": str(folder / "work")}
    steps = {"render": ["scenes", "make", "--kind", "mix", "--n", str(pages), "--seed", str(seed), "--out", "pages",
                        "--workers", str(workers)],
             "ingest": ["ingest", "pages/manifest.jsonl", "--workers", str(workers)], "extract": ["extract"],
             "generate": ["generate", "-g", "textrich"], "filter": ["filter"]}
    return {step: round(cli(*command, cwd=folder, env=env)[0], 1) for step, command in steps.items()}


def judged(workspace: Path) -> tuple[list, set[str], dict[str, str]]:
    """The questions the blind filter judged, the ids it kept, and each page's kind."""
    from benchsmith.settings import load_settings
    from benchsmith.store import Store
    from filters.blind import STAGE

    with Store(load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)}).db_url) as store:
        verdicts = store.get_verdicts(stage=STAGE, subject_kind="question")
        questions = store.get_questions(ids=[v.subject_id for v in verdicts])
        kinds = {item.id: (item.annotations.get("truth") or {}).get("kind", "") for item in store.get_items(kind="image")}
    return questions, {v.subject_id for v in verdicts if v.passed}, kinds


def page_truths(workspace: Path) -> dict[str, dict]:
    from benchsmith.settings import load_settings
    from benchsmith.store import Store

    with Store(load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)}).db_url) as store:
        return {item.id: item.annotations.get("truth") or {} for item in store.get_items(kind="image")}


def letters(questions: list) -> dict:
    from scipy.stats import chisquare

    counts = Counter(q.answer for q in questions)
    counts = [counts[i] for i in range(4)]
    return {"counts": counts, "chi2_p": round(float(chisquare(counts).pvalue), 4) if sum(counts) else None}


def key_right(question, truth: dict) -> bool | None:
    """Whether the key is the one right option, worked out from the question's words and the page's truth
    by the tests' readers; None for a question none of them reads."""
    from tests.generators import test_textrich, test_textrich_web

    key = question.options[question.answer]
    if truth["kind"] == "map":
        return test_textrich.right_options(question.text, question.options, truth) == {key}
    reader = test_textrich_web if truth["kind"] == "web" else test_textrich
    try:
        return reader.answer_from_truth(question.text, question.options, truth) == key
    except (AssertionError, KeyError, StopIteration, ValueError):
        return None


def names_undrawn_heading(question, truth: dict) -> bool:
    """The question names a column heading the page does not draw."""
    drawn = {t["text"] for t in truth.get("texts", ()) if t["role"] == "column_heading"}
    return any(re.search(rf"\b{re.escape(h)}\b", question.text) for h in truth.get("columns", ()) if h not in drawn)


def document_values(question, truth: dict) -> bool:
    """A question resting on a receipt's or an invoice's values: a price, a quantity, an amount."""
    return (truth.get("layout") in ("receipt", "invoice")
            and question.meta.get("template") in ("retrieval", "comparison", "arithmetic"))


def run(pages: int = 300, seed: int = 11, workers: int = 2, workspace: str = "") -> dict:
    from benchsmith.dimensions import registry

    with tempfile.TemporaryDirectory() as tmp:
        seconds = build(Path(tmp), pages, seed, workers) if not workspace else {}
        questions, kept_ids, kinds = judged(Path(workspace) if workspace else Path(tmp) / "work")
        truths = page_truths(Path(workspace) if workspace else Path(tmp) / "work")
    dimension = {d.id: d for d in registry()}
    kept = [q for q in questions if q.id in kept_ids]
    views = {"dimension": lambda q: dimension[q.dimension_id].key,
             "group": lambda q: dimension[q.dimension_id].group or "-",
             "family": lambda q: FAMILIES.get(kinds[q.item_id], kinds[q.item_id]),
             "document_values": lambda q: "yes" if document_values(q, truths[q.item_id]) else "no"}
    right = attack(kept)
    checked = [key_right(q, truths[q.item_id]) for q in kept]
    templates = Counter(f"{q.meta.get('template', '?')}:{q.meta.get('ask') or q.meta.get('extreme') or ''}"
                        for q in kept)
    result = {"case": "textrich_build", "pages": pages, "seed": seed, "workers": workers, "cores": os.cpu_count(),
              "load_average": os.getloadavg()[0], "seconds": seconds | {"total": round(sum(seconds.values()), 1)},
              "pages_by_kind": dict(Counter(kinds.values())), "judged": len(questions), "kept": len(kept),
              "letters": letters(kept), "by_template": dict(sorted(templates.items())),
              "keys": {"checked": sum(c is not None for c in checked), "right": sum(c is True for c in checked),
                       "wrong": [(q.text, q.options, q.answer) for q, c in zip(kept, checked) if c is False][:20],
                       "unread": sum(c is None for c in checked)},
              "compass_words_without_arrow": sum(bool(re.search(r"farthest (north|south|east|west)", q.text))
                                                 and not truths[q.item_id].get("compass") for q in kept),
              "heading_not_drawn": sum(names_undrawn_heading(q, truths[q.item_id]) for q in kept)}
    for view, name_of in views.items():
        names = [name_of(q) for q in kept]
        strongest, tables = tabulate(right, names)
        judged_by, kept_by = Counter(name_of(q) for q in questions), defaultdict(list)
        for name, q in zip(names, kept):
            kept_by[name].append(q)
        result[f"by_{view}"] = {name: {"judged": judged_by[name], "kept": len(kept_by[name]),
                                       "letters": letters(kept_by[name]),
                                       "strongest_adversary": strongest["by_group"].get(name)}
                                for name in sorted(judged_by)}
        if view == "dimension":
            result["strongest_adversary"] = strongest["overall"]
            result["adversaries"] = tables
    families = result["by_family"].values()
    result["targets"] = {"kept_per_family": 250, "letters_p": 0.05, "overall_ci95_upper": 0.28,
                         "per_dimension_accuracy": 0.35}
    result["meets_targets"] = (all(f["kept"] >= 250 and f["letters"]["chi2_p"] > 0.05 for f in families)
                               and result["letters"]["chi2_p"] > 0.05
                               and result["strongest_adversary"]["ci95"][1] <= 0.28
                               and all(d["strongest_adversary"] is None or d["strongest_adversary"]["accuracy"] <= 0.35
                                       for d in result["by_dimension"].values()))
    return result


if __name__ == "__main__":
    args = arguments(__doc__, quick={"pages": 60}, pages=300, seed=11, workers=2, workspace="",
                     name="textrich_build").parse_args()
    save(args.name, run(args.pages, args.seed, args.workers, args.workspace))
