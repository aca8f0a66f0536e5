"""The leaderboard and the item analysis, computed from the stored predictions of every run on a source.

Scores are per question first (a protocol's passes folded by `question_score`), then
averaged: per dimension, and overall over all questions (SEED-Bench's overall is over questions, not
a mean of dimensions). Each accuracy carries a 95% bootstrap interval over questions.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluation.contract import BaseProtocol, protocol
from evaluation.settings import EvalSettings
from evaluation.sources import Source

if TYPE_CHECKING:  # pandas is imported where a board is scored: every command loads this module with the settings
    import pandas as pd

CHANCE = 0.25


@dataclass
class RunScores:
    """One run's per-question results on a source."""

    run: dict[str, Any]
    questions: pd.DataFrame          # question_id, dimension, score, entropy, choice, passes, matched, skipped
    instability: bool = False        # its protocol reports the spread of choices over a question's passes

    @property
    def blind(self) -> bool:
        return self.run["adapter"] == "blind"


def score_run(run: dict[str, Any], predictions: Sequence[dict[str, Any]], current: set[str]) -> RunScores:
    """Fold a run's predictions into one row per question; `current` holds the subjects' question-and-
    content prefixes the source has now, so answers to an older wording are not counted."""
    by_question: dict[str, list[dict]] = defaultdict(list)
    for row in predictions:
        if row["subject"].rsplit(":", 1)[0] in current:
            by_question[row["question_id"]].append(row)
    rows = []
    shown = protocol(run["protocol"], run["config"].get("protocol"))  # under the settings it ran with
    for question_id, passes in by_question.items():
        scored = [p for p in passes if p["status"] != "skipped"]
        choices = [p["choice"] for p in scored]
        modal = Counter(choices).most_common(1)[0][0] if choices else None
        rows.append({"question_id": question_id, "dimension": passes[0]["dimension"],
                     "answer": passes[0]["answer"],
                     "score": question_score(shown, [bool(p["correct"]) for p in scored]),
                     "entropy": entropy(choices) if scored else None, "choice": modal, "passes": len(scored),
                     "matched": sum(p["status"] == "ok" for p in scored),
                     "votes": sum(len(p["votes"]) for p in scored),
                     "unparseable": sum(v is None for p in scored for v in p["votes"]),
                     "skipped": len(passes) - len(scored)})
    columns = ["question_id", "dimension", "answer", "score", "entropy", "choice", "passes", "matched", "votes",
               "unparseable", "skipped"]
    import pandas as pd

    return RunScores(run, pd.DataFrame(rows, columns=columns), shown.instability)


def bootstrap_interval(values: np.ndarray, resamples: int, seed: int = 0) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the mean over `resamples` resamples with replacement."""
    if len(values) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def collect(store, source: Source) -> list[RunScores]:
    current = {f"{q.question_id}:{q.content_hash[:12]}" for q in source.items}
    runs = store.eval_runs(source.label)
    predictions: dict[str, list[dict]] = defaultdict(list)
    for row in store.predictions([r["id"] for r in runs]):
        predictions[row["run_id"]].append(row)
    # a rerun under a changed configuration supersedes the older run of the same model and protocol
    latest = {(r["model"], r["protocol"]): r for r in runs if predictions[r["id"]]}
    return [score_run(run, predictions[run["id"]], current) for run in latest.values()]


@dataclass
class Board:
    source: str
    dimensions: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "dimensions": self.dimensions, "chance": CHANCE, "rows": self.rows}


def leaderboard(runs: Sequence[RunScores], source: Source, resamples: int) -> Board:
    dimensions = sorted({q.dimension for q in source.items})
    board = Board(source.label, dimensions)
    for scores in runs:
        frame = scores.questions.dropna(subset=["score"])
        overall = frame["score"].to_numpy(dtype=float)
        low, high = bootstrap_interval(overall, resamples)
        row: dict[str, Any] = {
            "model": scores.run["model"] + ("" if scores.run["protocol"] == "single" else f" ({scores.run['protocol']})"),
            "adapter": scores.run["adapter"], "protocol": scores.run["protocol"],
            "blind": scores.blind, "questions": int(len(frame)), "of": len(source.items),
            "overall": float(overall.mean()) if len(overall) else None, "overall_ci": [low, high],
            "format_hit": float(scores.questions["matched"].sum() / max(1, scores.questions["passes"].sum())),
            "instability": float(frame["entropy"].mean()) if scores.instability and len(frame) else None,
            "judge_unparseable": float(scores.questions["unparseable"].sum() / scores.questions["votes"].sum())
            if scores.questions["votes"].sum() else None,
            "skipped": int(scores.questions["skipped"].sum()), "dimensions": {}}
        for dimension in dimensions:
            values = frame.loc[frame["dimension"] == dimension, "score"].to_numpy(dtype=float)
            if len(values):
                row["dimensions"][dimension] = {"accuracy": float(values.mean()), "n": int(len(values)),
                                                "ci": list(bootstrap_interval(values, resamples))}
        board.rows.append(row)
    board.rows.sort(key=lambda r: (r["blind"], -(r["overall"] or 0)))
    return board


def write_board(store, settings, source: Source, folder) -> tuple[str, dict[str, Any], int]:
    """board.md, board.json and board.png of every question protocol's runs on `source`."""
    board = leaderboard(collect(store, source), source, settings.section("evaluate", EvalSettings).bootstrap)
    markdown = board_markdown(board)
    (folder / "board.md").write_text(markdown, encoding="utf-8")
    (folder / "board.json").write_text(json.dumps(board.as_dict(), indent=1), encoding="utf-8")
    if board.rows:
        plot_board(board, folder / "board.png")
    return markdown, board.as_dict(), len(board.rows)


def cell(value: float | None, spec: str = ".2f", scale: float = 1) -> str:
    """A table cell: `value` times `scale` formatted by `spec`; "-" for none (or NaN)."""
    return "-" if value is None or value != value else format(scale * value, spec)


_pct = partial(cell, spec=".1f", scale=100)


def board_markdown(board: Board) -> str:
    from benchsmith.dimensions import registry

    names = {d.key: d.name for d in registry()} | {str(d.id): d.name for d in registry()}
    head = ["model", *[names.get(d, d) for d in board.dimensions], "overall (95% CI)"]
    lines = [f"# Leaderboard: {board.source}", "",
             f"Accuracy in % per dimension and over all questions; chance is {100 * CHANCE:.0f}%. "
             "Rows marked *blind* never see the image.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in board.rows:
        cells = [f"{row['model']}{' *blind*' if row['blind'] else ''}"]
        cells += [_pct(row["dimensions"].get(d, {}).get("accuracy")) for d in board.dimensions]
        low, high = row["overall_ci"]
        cells.append(f"{_pct(row['overall'])} ({_pct(low)}–{_pct(high)})")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| model | protocol | questions | format hit % | instability | judge votes unparseable % | "
                  "skipped passes |", "|---|---|---|---|---|---|---|"]
    for row in board.rows:
        lines.append(f"| {row['model']} | {row['protocol']} | {row['questions']} of {row['of']} | "
                     f"{_pct(row['format_hit'])} | {cell(row['instability'], '.3f')} | "
                     f"{_pct(row['judge_unparseable'])} | {row['skipped']} |")
    return "\n".join(lines) + "\n"


def plot_board(board: Board, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in board.rows if r["overall"] is not None]
    fig, ax = plt.subplots(figsize=(7, 0.45 * max(3, len(rows)) + 1))
    y = np.arange(len(rows))[::-1]
    values = [100 * r["overall"] for r in rows]
    errors = [[100 * (r["overall"] - r["overall_ci"][0]) for r in rows],
              [100 * (r["overall_ci"][1] - r["overall"]) for r in rows]]
    ax.barh(y, values, xerr=errors, color=["#9e9e9e" if r["blind"] else "#3f6fb5" for r in rows], capsize=3)
    ax.axvline(100 * CHANCE, color="#c0392b", linestyle="--", linewidth=1, label="chance")
    ax.set_yticks(y, [r["model"] + (" (blind)" if r["blind"] else "") for r in rows])
    ax.set_xlabel("overall accuracy, % (95% bootstrap interval)")
    ax.set_xlim(0, 100)
    ax.legend(loc="lower right")
    ax.set_title(board.source)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def question_score(shown: BaseProtocol, correct: Sequence[bool]) -> float | None:
    """A question's score from its scored passes: None when every pass was skipped."""
    return shown.score(correct) if correct else None


def entropy(choices: Sequence[int | None]) -> float:
    """Entropy (nats) of the options chosen across a question's passes; a miss (None) is an outcome too."""
    counts = Counter(choices)
    total = sum(counts.values())
    return -sum(c / total * math.log(c / total) for c in counts.values()) if total else 0.0
