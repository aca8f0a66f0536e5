"""Do the offline blind solvers catch blind-answerable questions, and leave fair ones alone?

Targets (issue 5), with the `local` profile's solvers and drop rule:
- a set made blind-answerable on purpose (the answer leaked into the question, or three absurd
  distractors) is dropped at >= 80%;
- the oracle's programmatic questions (generators/programmatic.py on synthetic scenes) are dropped
  at <= 10%;
- on the programmatic questions kept, the offline solvers' blind accuracy is <= 28% (chance 25%).
Results: benchmarks/results/blind_leaks.json.

    .venv/bin/python benchmarks/blind_leaks.py            # 120 oracle scenes
    .venv/bin/python benchmarks/blind_leaks.py --quick    # 20 scenes
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, save, timed  # noqa: E402

PROGRAMMATIC_DIMENSIONS = ["instances_counting", "instance_location", "spatial_relation", "instance_attributes",
                           "instance_identity", "text_understanding"]
# How a careless writer gives the answer away in the question itself.
LEAK_TEMPLATES = [
    "Looking closely, the answer is {answer}. {question}",
    "{question} (Hint: it is {answer}.)",
    "In this picture: {answer}. {question}",
    "Someone who saw the image said \"{answer}\". {question}",
]
# Distractors no one would pick, whatever the image shows.
ABSURD = [
    "a medieval tax law", "the square root of Tuesday", "a violin made of soup", "the smell of thunder",
    "a committee of invisible giraffes", "the French Revolution", "a spaceship full of yoghurt",
    "the sound of a library", "an unpaid electricity bill from 1850", "the concept of democracy",
    "a sleeping volcano's dream", "the colour of jealousy", "a recipe for cement pancakes",
    "twelve philosophers arguing", "a password nobody remembers", "the migration of teapots",
]


def oracle_questions(n_scenes: int, seed: int):
    """Programmatic questions about oracle scenes that pass the quality gate, with the options in
    balanced random order."""
    from generators.quality import QualitySettings, balance_answers, gate

    kept, _dropped = gate(oracle_drafts(n_scenes, seed), {}, QualitySettings())
    return balance_answers(kept, seed=seed)


def oracle_drafts(n_scenes: int, seed: int):
    """Programmatic questions about oracle scenes as the generator writes them, before the quality gate
    (which drops, with their reasons, the ones the generator chose not to ask)."""
    from benchsmith.dimensions import registry
    from benchsmith.records import Fact, Image, Provenance
    from ingest.scenes import make_scenes
    from generators.programmatic import ProgrammaticSettings, generate, load_vocabulary

    supplied = Provenance(backend="supplied")
    settings = ProgrammaticSettings()
    with tempfile.TemporaryDirectory() as tmp:
        make_scenes(Path(tmp), n_scenes, seed=seed)
        rows = [json.loads(line) for line in (Path(tmp) / "manifest.jsonl").read_text().splitlines()]
    items = []
    for row in rows:
        image = Image(id=row["path"], path=row["path"], width=640, height=480)
        facts = [Fact(item_id=image.id, kind="object", text=o["label"], box=tuple(o["box"]),
                      attributes=o["attributes"], provenance=supplied) for o in row["objects"]]
        for o in row["ocr"]:
            x1, y1, x2, y2 = o["box"]
            facts.append(Fact(item_id=image.id, kind="ocr", text=o["text"],
                              quad=((x1, y1), (x2, y1), (x2, y2), (x1, y2)), provenance=supplied))
        items.append((image, facts))
    # widened with the collection's own labels, attributes and words, as the generate stage does
    vocabulary = load_vocabulary().widened([f for _image, facts in items for f in facts], settings,
                                           {image.id: (image.width, image.height) for image, _facts in items})
    return [question for image, facts in items for key in PROGRAMMATIC_DIMENSIONS
            for question in generate(image, facts, registry().get(key), vocabulary, settings, seed=seed)]


# Subtle leaks: no hint in any one question, but each template's key is always the same value, a prior
# a text-only model learns from the set (as "how many wheels" is always 4, or a generator's favourite).
TEMPLATE_PRIORS = {2: "silver kite", 3: "turquoise", 4: "top right", 5: "7", 6: "above it", 9: "ZEPHYR"}


def misspellings(word: str, rng: random.Random, n: int = 3) -> list[str]:
    """`n` distinct one-edit misspellings of `word` (a letter changed, dropped or doubled), in its case."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if word.isupper() else "abcdefghijklmnopqrstuvwxyz"
    out: list[str] = []
    while len(out) < n:
        at = rng.randrange(len(word))
        edit = rng.choice(["change", "drop", "double"])
        spelt = (word[:at] + rng.choice(letters) + word[at + 1:] if edit == "change"
                 else word[:at] + word[at + 1:] if edit == "drop" and len(word) > 3 else word[:at + 1] + word[at:])
        if spelt != word and spelt not in out:
            out.append(spelt)
    return out


def blind_answerable(questions, seed: int):
    """Each fair question made unfair: a third with the answer leaked into the text, a third with three
    absurd distractors, a third whose key is its template's favourite value; and every text question once
    more with three misspellings of its key as distractors (the only real word is the key)."""
    rng = random.Random(seed)
    out = []
    for q in questions:
        if q.dimension_id == 9:
            answer = q.options[q.answer]
            spelt = iter(misspellings(answer, rng))
            options = [o if j == q.answer else next(spelt) for j, o in enumerate(q.options)]
            out.append(q.model_copy(update={"options": options, "meta": {"leak": "misspelt_distractors"}}))
    for i, q in enumerate(questions):
        answer = q.options[q.answer]
        if i % 3 == 0:
            text = rng.choice(LEAK_TEMPLATES).format(answer=answer, question=q.text)
            out.append(q.model_copy(update={"text": text, "meta": {"leak": "answer_in_question"}}))
        elif i % 3 == 1:
            absurd = iter(rng.sample(ABSURD, 3))
            options = [o if j == q.answer else next(absurd) for j, o in enumerate(q.options)]
            out.append(q.model_copy(update={"options": options, "meta": {"leak": "absurd_options"}}))
        else:
            favourite = TEMPLATE_PRIORS[q.dimension_id]
            options = [favourite if j == q.answer else o for j, o in enumerate(q.options)]
            if favourite in q.options:  # already there as a distractor: keep the question fair-looking
                continue
            out.append(q.model_copy(update={"options": options, "meta": {"leak": "template_prior"}}))
    return out


def run(scenes: int = 120, seed: int = 3) -> dict:
    from benchsmith.settings import load_settings
    from filters.blind import blind_settings, fit_learners, judge_questions, report_from, solvers_from

    config = blind_settings(load_settings(profile="local", env={}))
    solvers = solvers_from(config)
    fair = oracle_questions(scenes, seed)
    unfair = blind_answerable(fair, seed)

    def judge(questions):
        fit_learners(solvers, questions)
        return judge_questions(questions, solvers, config)
    seconds, (fair_verdicts, unfair_verdicts) = timed(lambda: (judge(fair), judge(unfair)))

    def drop_rate(verdicts) -> float:
        return sum(not v.passed for v in verdicts) / len(verdicts)

    def by_solver(verdicts) -> dict:
        return {s.name: round(sum(s.name in v.details["knowing"] for v in verdicts) / len(verdicts), 4)
                for s in solvers}

    leak_of = {q.id: q.meta["leak"] for q in unfair}
    kinds = {kind: [v for v in unfair_verdicts if leak_of[v.subject_id] == kind]
             for kind in ("answer_in_question", "absurd_options", "template_prior", "misspelt_distractors")}

    def caught_only_by(verdicts) -> dict:
        """Per solver, the share of questions it alone knows: what the others would have let through."""
        return {s.name: round(sum(v.details["knowing"] == [s.name] for v in verdicts) / max(1, len(verdicts)), 4)
                for s in solvers}
    fair_report = report_from(fair_verdicts)
    kept_accuracy = fair_report.overall(kept_only=True)
    mean_kept_accuracy = sum(kept_accuracy.values()) / len(kept_accuracy)
    result = {
        "case": "blind_leaks", "scenes": scenes, "seed": seed, "rule": config.rule, "max_right": config.max_right,
        "rotations": config.rotations, "solvers": [s.name for s in solvers], "seconds": round(seconds, 2),
        "blind_answerable": {"n": len(unfair), "drop_rate": round(drop_rate(unfair_verdicts), 4),
                             "drop_rate_by_kind": {k: round(drop_rate(v), 4) for k, v in kinds.items()},
                             "known_by_solver": by_solver(unfair_verdicts),
                             "known_by_solver_by_kind": {k: by_solver(v) for k, v in kinds.items()},
                             "caught_only_by_by_kind": {k: caught_only_by(v) for k, v in kinds.items()}},
        "programmatic": {"n": len(fair), "drop_rate": round(drop_rate(fair_verdicts), 4),
                         "drop_rate_by_dimension": {d: round(fair_report.drop_rate(d), 4) for d in fair_report.judged},
                         "known_by_solver": by_solver(fair_verdicts),
                         "accuracy_before": {k: round(v, 4) for k, v in fair_report.overall(kept_only=False).items()},
                         "accuracy_after": {k: round(v, 4) for k, v in kept_accuracy.items()},
                         "mean_accuracy_after": round(mean_kept_accuracy, 4)},
        "targets": {"blind_answerable_drop_rate": ">= 0.80", "programmatic_drop_rate": "<= 0.20",
                    "kept_accuracy": "<= 0.28"},
    }
    result["meets_targets"] = (result["blind_answerable"]["drop_rate"] >= 0.8
                               and result["programmatic"]["drop_rate"] <= 0.2 and mean_kept_accuracy <= 0.28
                               and max(kept_accuracy.values()) <= 0.28)
    return result


if __name__ == "__main__":
    args = arguments(__doc__, {"scenes": 20}, scenes=120, seed=3).parse_args()
    save("blind_leaks", run(args.scenes, args.seed))
