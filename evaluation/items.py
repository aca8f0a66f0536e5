"""Item analysis: what the models' answers say about each question.

Each model counts once. A model evaluated under several protocols is read from one of its runs: the
first of its protocols in the order single, circular, instability, then any other by name
(`PROTOCOL_ORDER`); `items.csv` names the run each model was read from in its `runs` column. Pooling a
model's runs would count its one mistake as the agreement of several models.

Over every model (blind baselines apart):
- difficulty: the mean score of the models on the question (1 = every model right);
- discrimination: the point-biserial correlation between being right on this question and a model's
  score on the rest of the source; near zero or negative means the question does not separate strong
  models from weak ones (needs three models or more);
Flags, each a reason to look at the question again:
- `same_wrong_option`: two models or more, every one wrong, and all choosing the same wrong option:
  the key is likely wrong;
- `no_model_beats_chance`: no model scores above chance on it;
- `blind_right`: a text-only baseline answers it without the image.

The flags are kept in the store as verdicts of the `item_analysis` stage, one per flag raised on a question,
where `benchsmith review push --flagged` finds them; a flag that a later analysis of the question no longer
raises is kept as passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from annotation.second_look import FLAG_TEXT
from benchsmith.records import LETTERS, Verdict
from evaluation.board import CHANCE, RunScores

STAGE = "item_analysis"
PROTOCOL_ORDER = ("single", "circular", "instability")


def one_run_per_model(runs: Sequence[RunScores]) -> list[RunScores]:
    """Each model's run under the first of its protocols in PROTOCOL_ORDER."""
    chosen: dict[str, RunScores] = {}
    def rank(run: RunScores) -> tuple[int, str]:
        name = run.run["protocol"]
        return (PROTOCOL_ORDER.index(name) if name in PROTOCOL_ORDER else len(PROTOCOL_ORDER), name)

    for run in sorted(runs, key=rank):
        chosen.setdefault(run.run["model"], run)
    return list(chosen.values())


def item_table(runs: Sequence[RunScores]) -> pd.DataFrame:
    runs = one_run_per_model(runs)
    models = [r for r in runs if not r.blind]
    blind = [r for r in runs if r.blind]
    score = pd.DataFrame({r.run["model"]: r.questions.set_index("question_id")["score"] for r in models}, dtype=float)
    choice = pd.DataFrame({r.run["model"]: r.questions.set_index("question_id")["choice"] for r in models})
    blind_score = pd.DataFrame({r.run["model"]: r.questions.set_index("question_id")["score"] for r in blind},
                               dtype=float)
    read_from = ";".join(f"{r.run['model']}={r.run['protocol']}" for r in runs)
    ids = sorted(set(score.index) | set(blind_score.index))
    score, choice, blind_score = score.reindex(ids), choice.reindex(ids), blind_score.reindex(ids)
    dimension = pd.concat([r.questions.set_index("question_id")["dimension"] for r in runs])
    dimension = dimension[~dimension.index.duplicated()].reindex(ids)
    answer = pd.concat([r.questions.set_index("question_id")["answer"] for r in runs])
    answer = answer[~answer.index.duplicated()].reindex(ids)
    totals = score.sum(axis=0, skipna=True)
    counts = score.notna().sum(axis=0)
    rows: list[dict[str, Any]] = []
    for qid in ids:
        right = score.loc[qid].dropna()
        flags = []
        picks = {m: choice.loc[qid, m] for m in right.index}
        chosen = set(picks.values())
        common = next(iter(chosen)) if len(chosen) == 1 else None
        if len(right) >= 2 and (right == 0).all() and pd.notna(common):
            flags.append("same_wrong_option")
        if len(right) and (right <= CHANCE).all():
            flags.append("no_model_beats_chance")
        knew = [m for m, v in blind_score.loc[qid].dropna().items() if v > 0.5]
        if knew:
            flags.append("blind_right")
        rows.append({"question_id": qid, "dimension": dimension.loc[qid], "key": answer.loc[qid],
                     "models": len(right), "difficulty": float(right.mean()) if len(right) else None,
                     "discrimination": _point_biserial(right, totals, counts),
                     "common_wrong_choice": common if "same_wrong_option" in flags else None,
                     "choices": ";".join(f"{m}={_letter(c)}" for m, c in picks.items()),
                     "blind_right": ";".join(knew), "flags": ";".join(flags), "runs": read_from})
    return pd.DataFrame(rows, columns=["question_id", "dimension", "key", "models", "difficulty",
                                       "discrimination", "common_wrong_choice", "choices", "blind_right", "flags",
                                       "runs"])


def _letter(choice) -> str:
    """An option index as its letter; "-" for a reply that matched no option."""
    return LETTERS[int(choice)] if pd.notna(choice) else "-"


def _point_biserial(item: pd.Series, totals: pd.Series, counts: pd.Series) -> float | None:
    """Correlation between the item's scores and each model's mean score on every other question."""
    if len(item) < 3:
        return None
    rest = np.array([(totals[m] - item[m]) / max(1, counts[m] - 1) for m in item.index])
    values = item.to_numpy(dtype=float)
    if values.std() == 0 or rest.std() == 0:
        return None
    return float(np.corrcoef(values, rest)[0, 1])


def flag_verdicts(items: pd.DataFrame, source: str, standing: Sequence[Verdict]) -> list[Verdict]:
    """A failed verdict for each flag raised on an item of the analysis of `source`, with the key the models
    were scored against, each model's choice ("-": no option matched) and the blind baselines that got it
    right (what `benchsmith review push --flagged` shows the annotators); and a passed one for each
    `standing` flag (a failed verdict of this stage) that the analysis no longer raises on its question."""
    earlier: dict[str, list[Verdict]] = {}
    for verdict in standing:
        earlier.setdefault(verdict.subject_id, []).append(verdict)
    out = []
    for row in items.itertuples():
        flags = row.flags.split(";") if row.flags else []
        details = {"source": source, "key": _letter(row.key),
                   "choices": dict(pair.rsplit("=", 1) for pair in row.choices.split(";") if pair),
                   "blind_right": [m for m in row.blind_right.split(";") if m]}
        out += [Verdict(subject_id=row.question_id, subject_kind="question", stage=STAGE, rule=flag, passed=False,
                        reason=FLAG_TEXT[flag], details=details) for flag in flags]
        out += [v.model_copy(update={"passed": True, "reason": "no longer flagged", "details": {"source": source}})
                for v in earlier.get(row.question_id, []) if v.rule not in flags]
    return out
