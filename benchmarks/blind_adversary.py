"""How far above chance can a text-only model get on the questions the blind filter keeps?

Programmatic questions over N oracle scenes (the generator with the scenes' supplied facts and the
collection-widened vocabulary, as `benchsmith generate` does on a local build) go through the quality
gate and the local profile's blind filter. Two adversaries of our own attack the kept questions, each
trained on 4/5 of the images and tested on the rest (5 folds by image):
- `logistic`: the learned solver's model (filters/solvers/learned.py): hashed words, words crossed
  with the question, option text per question, length and numeric ranks, centroid features;
- `boosted`: gradient-boosted trees over dense features: how often each option text, each option word
  and each numeric rank was the key in the training folds for the same question form (smoothed, and
  leaving the question's own image out while training), the number itself, length and numeric rank,
  shared words and characters with the other options (centroid), overlap with the question, and the
  share of the option's words that are real words.
The option-centroid heuristic is scored beside them. Reported: overall and per-dimension accuracy with
Wilson 95% intervals per adversary, the strongest per dimension, the counting key's rank among the
sorted numbers (chi-square against uniform), and how many questions each dimension loses at generation
(the quality gate, by rule) and in the blind filter. Targets: the strongest adversary's upper 95% bound
<= 28% overall and its accuracy <= 35% in every dimension; counting rank p > 0.05. Beside them, the boosted
adversary across two collections, each of N scenes built and balanced on its own (seeds S and S+1), trained
on one collection's kept questions and tested on the other's (`attack_across`).
Results: benchmarks/results/blind_adversary.json.

    .venv/bin/python benchmarks/blind_adversary.py              # 200 scenes
    .venv/bin/python benchmarks/blind_adversary.py --scenes 60
"""

from __future__ import annotations

import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.blind_leaks import oracle_drafts  # noqa: E402
from benchmarks.common import arguments, save  # noqa: E402

FOLDS = 5
SMOOTHING = 4.0  # pseudo-counts at the 1/4 base rate behind every key-rate feature


def _form(text: str) -> str:
    """The question's form: its first two words ('how many', 'where is', 'what colour')."""
    return " ".join(re.findall(r"[a-z]+", text.lower())[:2])


def _number(option: str) -> float | None:
    try:
        return float(option)
    except ValueError:
        return None


def _keys(q) -> list[tuple[str, ...]]:
    """Per option, the categorical keys whose key rates are features."""
    numbers = [_number(o) for o in q.options]
    ranks = sorted(numbers).index if all(n is not None for n in numbers) else None
    form, text = _form(q.text), q.text.lower()
    out = []
    for i, option in enumerate(q.options):
        o = option.lower()
        rank = str(ranks(numbers[i])) if ranks else "-"
        out.append((f"{form}|{o}", f"{text}|{o}", f"{form}|rank={rank}", f"{form}|{o}|rank={rank}",
                    *(f"{form}|w={w}" for w in re.findall(r"[a-z0-9]+", o))))
    return out


class KeyRates:
    """Counts of (key, shown) per categorical key over a set of questions, grouped by image so an image's
    own questions can be left out."""

    def __init__(self) -> None:
        self.total: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        self.by_group: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))

    def add(self, q) -> None:
        for i, keys in enumerate(_keys(q)):
            for k in keys:
                for table in (self.total, self.by_group[q.group]):
                    table[k][0] += i == q.answer
                    table[k][1] += 1

    def rate(self, key: str, leave_out: str | None) -> float:
        right, shown = self.total.get(key, (0.0, 0.0))
        if leave_out is not None and key in self.by_group.get(leave_out, {}):
            own = self.by_group[leave_out][key]
            right, shown = right - own[0], shown - own[1]
        return (right + SMOOTHING / 4) / (shown + SMOOTHING)


def _structure(q, real_words) -> list[list[float]]:
    """Per option, the features that do not depend on the training folds."""
    from filters.solvers.learned import option_features

    real = real_words.scores(q.options)
    numbers = [_number(o) for o in q.options]
    return [[numbers[i] if numbers[i] is not None else -1.0, s.get("numeric_rank", -1.0), s["length_rank"],
             s["longest"], s["shortest"], s["question_overlap"], s["shared_words"], s["char_agreement"], real[i],
             float(len(q.options[i]))] for i, s in enumerate(option_features(q.text, q.options))]


def _dense(q, structure: list[list[float]], rates: KeyRates, leave_out: str | None) -> list[list[float]]:
    rows = []
    for i, keys in enumerate(_keys(q)):
        words = [rates.rate(k, leave_out) for k in keys[4:]] or [0.25]
        rows.append([*(rates.rate(k, leave_out) for k in keys[:4]), float(np.mean(words)), float(np.max(words)),
                     *structure[i]])
    return rows


def boosted_scores(labelled: list, fold_of: dict[str, int], folds: int = FOLDS) -> list[list[float]]:
    """Each question's option scores from gradient-boosted trees trained on the other folds."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from filters.solvers import RealWordConfig
    from filters.solvers.real_word import RealWordSolver

    real_words = RealWordSolver(RealWordConfig(kind="real_word"))
    real_words.fit(labelled)
    structure = [_structure(q, real_words) for q in labelled]
    scores: list[list[float]] = [[0.0] * len(q.options) for q in labelled]
    for fold in range(folds):
        train = [(i, q) for i, q in enumerate(labelled) if fold_of[q.group] != fold]
        test = [(i, q) for i, q in enumerate(labelled) if fold_of[q.group] == fold]
        rates = KeyRates()
        for _i, q in train:
            rates.add(q)
        x, y = [], []
        for index, q in train:  # the image's own questions left out of its features, as at test time
            for i, row in enumerate(_dense(q, structure[index], rates, leave_out=q.group)):
                x.append(row)
                y.append(int(i == q.answer))
        model = HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15,
                                               l2_regularization=1.0, random_state=0).fit(np.array(x), np.array(y))
        for i, q in test:
            scores[i] = [float(p) for p in model.predict_proba(np.array(_dense(q, structure[i], rates, None)))[:, 1]]
    return scores


def attack(kept: list) -> dict[str, list[bool]]:
    """Whether each adversary (and the centroid heuristic) picks the key of each kept question, the
    learned ones trained on the other folds (by image)."""
    from filters.solvers import LearnedConfig
    from filters.solvers.learned import Labelled, PoolModel
    from generators.quality import centroid

    labelled = [Labelled(q.text, tuple(q.options), q.answer, q.item_id) for q in kept]
    logistic = PoolModel(LearnedConfig(kind="learned", min_pool=50, folds=FOLDS)).fit(labelled)
    scored = {"logistic": logistic.scores_many([(q.text, q.options, q.group) for q in labelled]),
              "boosted": boosted_scores(labelled, logistic.fold_of_group),
              "centroid_heuristic": [centroid(q.options, frozenset()) for q in labelled]}
    return {adversary: [max(range(4), key=s.__getitem__) == q.answer for q, s in zip(labelled, scores)]
            for adversary, scores in scored.items()}


def attack_across(collections: list[list]) -> list[list[bool]]:
    """Whether the boosted adversary picks the key of each kept question of each collection, trained on the
    kept questions of the other collections, each built and balanced on its own: what a text-only model
    learns from benchmarks this factory made of other photos. Cross-fitting inside one collection also
    measures how the collection was balanced as a whole: a value that is the key of the photos left out is
    a key less often in the rest, a cue that only the left-out photos' own answers create."""
    from filters.solvers.learned import Labelled

    labelled = [Labelled(q.text, tuple(q.options), q.answer, f"{index}:{q.item_id}")
                for index, kept in enumerate(collections) for q in kept]
    fold_of = {q.group: int(q.group.split(":", 1)[0]) for q in labelled}
    hits = [max(range(len(s)), key=s.__getitem__) == q.answer
            for q, s in zip(labelled, boosted_scores(labelled, fold_of, len(collections)))]
    out, start = [], 0
    for kept in collections:
        out.append(hits[start:start + len(kept)])
        start += len(kept)
    return out


def across_table(collections: list[list], names: list[str], group: dict) -> dict[str, dict]:
    """`attack_across` over `collections`, tabulated per collection (keyed by `names`): overall and by
    each question's `group` (its dimension name by dimension id)."""
    return {name: tabulate({"boosted": hits}, [group[q.dimension_id] for q in kept])[1]["boosted"]
            for name, hits, kept in zip(names, attack_across(collections), collections)}


def tabulate(right: dict[str, list[bool]], groups: list[str]) -> tuple[dict, dict]:
    """Each adversary's accuracy (Wilson 95% interval) overall and per group (one name per question: its
    dimension, its family), and the strongest learned adversary overall and in each group."""
    from filters.blind import wilson

    def cell(hits: list[bool]) -> dict:
        r, n = sum(hits), len(hits)
        return {"right": r, "n": n, "accuracy": round(r / n, 4), "ci95": [round(x, 4) for x in wilson(r, n)]}

    tables = {}
    for adversary, hits in right.items():
        by_group: dict[str, list[bool]] = defaultdict(list)
        for group, hit in zip(groups, hits):
            by_group[group].append(hit)
        tables[adversary] = {"overall": cell(hits), "by_group": {g: cell(h) for g, h in sorted(by_group.items())}}
    learned = [a for a in ("logistic", "boosted") if a in tables]
    strongest = {"overall": max((tables[a]["overall"] | {"adversary": a} for a in learned), key=lambda c: c["accuracy"]),
                 "by_group": {g: max((tables[a]["by_group"][g] | {"adversary": a} for a in learned),
                                     key=lambda c: c["accuracy"]) for g in tables[learned[0]]["by_group"]}}
    return strongest, tables


def build(scenes: int, seed: int):
    """The oracle scenes' programmatic drafts through the quality gate and the local profile's blind filter:
    the drafts, what the gate dropped, the questions judged and the blind filter's verdicts."""
    from benchsmith.settings import load_settings
    from filters.blind import blind_settings, fit_learners, judge_questions, solvers_from
    from generators.quality import QualitySettings, balance_answers, gate

    drafts = oracle_drafts(scenes, seed)
    generated, dropped_at_gate = gate(drafts, {}, QualitySettings())
    questions = balance_answers(generated, seed=seed)
    config = blind_settings(load_settings(profile="local", env={}))
    solvers = solvers_from(config)
    fit_learners(solvers, questions)
    verdicts = {v.subject_id: v for v in judge_questions(questions, solvers, config)}
    return drafts, dropped_at_gate, questions, verdicts


def run(scenes: int = 200, seed: int = 5) -> dict:
    from scipy.stats import chisquare

    from benchsmith.dimensions import registry

    drafts, dropped_at_gate, questions, verdicts = build(scenes, seed)
    kept = [q for q in questions if verdicts[q.id].passed]
    name = {d.id: d.key for d in registry()}
    lost = Counter(q.dimension_id for q in questions if not verdicts[q.id].passed)
    total = Counter(q.dimension_id for q in questions)
    drafted = Counter(q.dimension_id for q in drafts)
    gate_rules: dict[int, Counter] = defaultdict(Counter)
    for question, verdict in dropped_at_gate:
        gate_rules[question.dimension_id][verdict.rule] += 1

    strongest, tables = tabulate(attack(kept), [name[q.dimension_id] for q in kept])
    # a second collection of other scenes, balanced on its own: the adversary trained on one, tested on the other
    _drafts, _dropped, others, other_verdicts = build(scenes, seed + 1)
    apart = [kept, [q for q in others if other_verdicts[q.id].passed]]
    across = across_table(apart, [f"tested on seed {s}" for s in (seed, seed + 1)], name)
    counting = registry().get("instances_counting").id
    ranks = Counter(sorted(int(o) for o in q.options).index(int(q.options[q.answer]))  # "How many": numbers
                    for q in kept if q.dimension_id == counting and all(o.isdigit() for o in q.options))
    result = {
        "scenes": scenes, "seed": seed, "drafted": len(drafts), "passed_quality": len(questions), "kept": len(kept),
        "per_dimension": {name[d]: {"drafted": drafted[d], "dropped_at_generation": dict(gate_rules[d]),
                                    "judged": total[d], "lost_in_filter": lost[d], "kept": total[d] - lost[d]}
                          for d in sorted(drafted)},
        "adversaries": tables, "strongest": strongest, "adversary_across_collections": across,
        "counting_key_rank": {"counts": [ranks[r] for r in range(4)],
                              "chi2_p": round(float(chisquare([ranks[r] for r in range(4)]).pvalue), 4)},
        "targets": {"overall_ci95_upper": 0.28, "per_dimension_accuracy": 0.35, "counting_rank_p": 0.05},
    }
    result["meets_targets"] = (strongest["overall"]["ci95"][1] <= 0.28
                               and all(c["accuracy"] <= 0.35 for c in strongest["by_group"].values())
                               and result["counting_key_rank"]["chi2_p"] > 0.05
                               and all(v["kept"] > 0 for v in result["per_dimension"].values()))
    return result


if __name__ == "__main__":
    args = arguments(__doc__, scenes=200, seed=5).parse_args()
    save("blind_adversary", run(args.scenes, args.seed))
