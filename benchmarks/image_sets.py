"""How fast are scene sets rendered and asked about, and do the questions the blind filter keeps need
several of the set's images?

Through the installed command, as a user runs it: `scenes make --sets` of each kind (5% pairs, 45%
sets of 3-4 images, 40% view sets, 10% marked pairs; timed from outside, process start
included), `ingest` of every manifest, `generate -g image_sets` (timed) and the blind `filter`. Then, over
the questions the blind filter kept:
- how many per dimension (27-29), and per template;
- every key worked out again from the question's words and the member images' manifest rows (the tests'
  checker, `right_options`): wrong keys (the true options are not the key alone) and ambiguous ones (more
  than one option is true);
- how many one member image answers alone, per dimension and kind of set: the single-image reading the
  generator drops drafts by (`generators.image_sets.one_image_answers`), from the question's words and
  each member's recorded truth;
- the answer letters' chi-square against uniform;
- the strongest text-only adversary of benchmarks/blind_adversary.py trained on the kept questions of
  every seed run together (5 folds by set), so that it judges 2,000 or more.
Targets on 200 sets a seed: >= 250 kept questions per dimension; every key right, ambiguous <= 0.5%;
one image answers <= 5% in every dimension and kind of set; letters p > 0.05; the adversary's upper 95%
bound <= 28% on >= 2,000 kept questions.
Results: benchmarks/results/image_sets.json.

    .venv/bin/python benchmarks/image_sets.py                  # 200 sets, seeds 7 8 9
    .venv/bin/python benchmarks/image_sets.py --quick          # 40 sets, seed 7
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.blind_adversary import attack, tabulate  # noqa: E402
from benchmarks.common import arguments, cli, save, user_env  # noqa: E402

SHARES = {"pairs": 0.05, "sets": 0.45, "views": 0.4, "marked": 0.1}  # of the sets built, by kind: views carry dimension 29


def share(hits: int, n: int) -> dict:
    return {"n": n, "count": hits, "share": round(hits / n, 4) if n else None}


def run(sets: int, seed: int) -> tuple[dict, list]:
    """One seed's build, its figures, and its kept questions (for the adversary over every seed)."""
    from scipy.stats import chisquare

    from benchsmith.store import Store
    from filters.blind import STAGE
    from generators.image_sets import members, one_image_answers
    from tests.generators.test_image_sets import Members, right_options

    counts = {kind: round(sets * part) for kind, part in SHARES.items()}
    with tempfile.TemporaryDirectory() as tmp:
        tmp, env = Path(tmp), user_env() | {"BENCHSMITH_WORKSPACE": str(Path(tmp) / "bench")}
        rendering, rows = {}, []
        for kind, n in counts.items():
            seconds, _ = cli("scenes", "make", "--sets", str(n), "--kind", kind, "--out", kind, "--seed", str(seed),
                             cwd=tmp, env=env)
            rows += [json.loads(line) for line in (tmp / kind / "manifest.jsonl").read_text().splitlines()]
            rendering[kind] = {"sets": n, "seconds": round(seconds, 2), "sets_per_second": round(n / seconds, 1)}
        ingest_seconds, _ = cli("ingest", *(f"{kind}/manifest.jsonl" for kind in counts), cwd=tmp, env=env)
        generate_seconds, printed = cli("generate", "-g", "image_sets", cwd=tmp, env=env | {"COLUMNS": "200"})
        filter_seconds, _ = cli("filter", cwd=tmp, env=env)
        with Store(f"sqlite:///{tmp / 'bench' / 'benchsmith.db'}") as store:
            names = {i.path: i.original_name for i in store.get_items(kind="image")}
            items = {s.id: tuple(names[p] for p in s.paths) for s in store.get_items(kind="image_set")}
            questions = [q for q in store.get_questions(status=None) if q.meta.get("generator") == "image_sets"]
            blind_kept = {v.subject_id for v in store.get_verdicts(stage=STAGE, subject_kind="question") if v.passed}
    by_path = {r["path"]: r for r in rows if "path" in r}
    listed = {tuple(r["images"]): r for r in rows if "images" in r}
    kept = [q for q in questions if q.id in blind_kept]
    wrong, ambiguous, alone = [], [], defaultdict(list)
    for q in kept:
        row = listed[items[q.item_id]]
        try:
            right = right_options(q.text, q.options, Members(row, by_path))
        except (AssertionError, ValueError) as unclear:  # the checker finds no one shape it is about
            right = {f"unchecked: {unclear!r}"}
        if right != {q.options[q.answer]}:
            (ambiguous if q.options[q.answer] in right else wrong).append(q.text)
        answered = one_image_answers(q.text, q.options, q.options[q.answer], members(row["truth"]))
        alone[(row["truth"]["kind"], q.dimension_id)].append(answered is not None)
    letters = Counter(q.answer for q in kept)
    per_dimension = Counter(q.dimension_id for q in kept)
    by_cell = {f"{kind}:{d}": share(sum(h), len(h)) for (kind, d), h in sorted(alone.items())}
    by_dimension = {str(d): share(sum(sum(h) for (_k, dd), h in alone.items() if dd == d),
                                  sum(len(h) for (_k, dd), h in alone.items() if dd == d)) for d in (27, 28, 29)}
    result = {"case": "image_sets", "cores": os.cpu_count(), "load_average": os.getloadavg()[0], "sets": counts,
              "seed": seed, "rendering": rendering, "ingest_seconds": round(ingest_seconds, 2),
              "generate_seconds": round(generate_seconds, 2), "filter_seconds": round(filter_seconds, 2),
              "generated": len(questions), "kept": len(kept),
              "jobs": int(re.search(r"jobs\s+│\s+(\d+) ", printed)[1]),
              "kept_per_dimension": dict(sorted(per_dimension.items())),
              "kept_per_template": dict(sorted(Counter(f"{q.dimension_id}:{q.meta['template']}"
                                                       for q in kept).items())),
              "dropped_at_generation": {rule: int(n) for rule, n in re.findall(r"dropped: (\w+)\s+│\s+(\d+)", printed)},
              "one_image_answers": {"by_dimension": by_dimension, "by_kind_and_dimension": by_cell},
              "keys": {"checked": len(kept), "wrong": len(wrong), "ambiguous": share(len(ambiguous), len(kept)),
                       "examples": (wrong + ambiguous)[:10]},
              "letters": {"ABCD"[k]: letters[k] for k in range(4)},
              "letters_chi2_p": round(float(chisquare([letters[k] for k in range(4)]).pvalue), 4)}
    result["meets_targets_without_adversary"] = (
        all(per_dimension[d] >= 250 for d in (27, 28, 29)) and not wrong
        and len(ambiguous) <= 0.005 * len(kept) and all(c["share"] <= 0.05 for c in by_cell.values())
        and result["letters_chi2_p"] > 0.05)
    return result, kept


if __name__ == "__main__":
    args = arguments(__doc__, quick={"sets": 40, "seeds": [7]}, sets=200, seeds=[7, 8, 9]).parse_args()
    runs = [run(args.sets, seed) for seed in args.seeds]
    kept = [q for _r, questions in runs for q in questions]
    right = attack(kept)
    strongest, tables = tabulate(right, [str(q.dimension_id) for q in kept])
    by_template, _ = tabulate(right, [f"{q.dimension_id}:{q.meta['template']}" for q in kept])
    adversary = {"kept_questions": len(kept), "seeds": args.seeds, "strongest": strongest,
                 "by_template": by_template["by_group"], "adversaries": tables}
    met = (all(r["meets_targets_without_adversary"] for r, _q in runs) and len(kept) >= 2000
           and strongest["overall"]["ci95"][1] <= 0.28)
    save("image_sets", {"runs": [r for r, _q in runs], "adversary_over_every_seed": adversary, "meets_targets": met})
