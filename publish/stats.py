"""Tables and plots of the question set at any stage, as small pure functions over pandas DataFrames.

`question_frame(store)` is the one place that reads the store; everything else takes a frame, so the
dataset card, `benchsmith stats` and the run report all draw the same numbers the same way.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from benchsmith.dimensions import registry  # noqa: E402
from benchsmith.records import LETTERS, TRANSITIONS  # noqa: E402

STATUSES = list(TRANSITIONS)
FUNNEL_STEPS = ["generated", "passed quality", "passed blind filter", "accepted in review", "published"]
COLUMNS = ["question_id", "item_id", "dimension_id", "category", "status", "answer", "generator", "model", "reached"]


def reached(status: str, failed_quality: bool, passed_blind: bool) -> int:
    """How far along FUNNEL_STEPS a question got (an index), from its status and its verdicts: the quality
    gate and the blind filter both leave a question `dropped`, only their verdicts tell which one."""
    if status == "published":
        return 4
    if status in ("accepted", "withdrawn"):  # withdrawn: accepted once, then taken out in review or at publish
        return 3
    if passed_blind or status in ("in_review", "rejected"):
        return 2
    return 0 if failed_quality else 1


def question_frame(store) -> pd.DataFrame:
    """One row per question with its reviewed dimension and answer letter, and how far it got."""
    names = {d.id: d.name for d in registry()}
    failed_quality = {v.subject_id for v in store.get_verdicts(stage="quality", passed=False, subject_kind="question")}
    passed_blind = {v.subject_id for v in store.get_verdicts(stage="blind", passed=True, subject_kind="question")}
    rows = []
    for q in store.get_questions():
        dimension, answer = q.final_dimension_id, q.final_answer
        rows.append((q.id, q.item_id, dimension, names.get(dimension, f"dimension {dimension}"), q.status,
                     LETTERS[answer], q.provenance.backend, q.provenance.model or "",
                     reached(q.status, q.id in failed_quality, q.id in passed_blind)))
    return pd.DataFrame(rows, columns=COLUMNS)


def dimension_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Questions per dimension, in dimension order."""
    counts = frame.groupby(["dimension_id", "category"]).size().rename("count").reset_index()
    return counts.sort_values("dimension_id", ignore_index=True)


def status_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Dimension x status counts, with every status as a column."""
    table = frame.pivot_table(index=["dimension_id", "category"], columns="status", values="question_id",
                              aggfunc="count", fill_value=0)
    return table.reindex(columns=STATUSES, fill_value=0).reset_index().rename_axis(columns=None)


def funnel(frame: pd.DataFrame) -> pd.DataFrame:
    """How many questions reached each step, from generated to published."""
    counts = [int((frame["reached"] >= i).sum()) for i in range(len(FUNNEL_STEPS))]
    return pd.DataFrame({"step": FUNNEL_STEPS, "count": counts})


def answer_balance(frame: pd.DataFrame) -> pd.DataFrame:
    """How often each letter is the right answer; a skew lets a model score by always guessing it."""
    counts = frame["answer"].value_counts().reindex(list(LETTERS), fill_value=0)
    total = int(counts.sum())
    return pd.DataFrame({"answer": list(LETTERS), "count": counts.to_numpy(),
                         "share": [round(n / total, 4) if total else 0.0 for n in counts]})


def _bar_chart(labels: list[str], values: list[int], title: str, path: Path, horizontal: bool) -> Path:
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.45 * len(labels) + 1)) if horizontal else (6, 4))
    bars = ax.barh(labels, values, color="#4c72b0") if horizontal else ax.bar(labels, values, color="#4c72b0")
    if horizontal:
        ax.invert_yaxis()
    ax.bar_label(bars, padding=2)
    ax.set_title(title)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


PLOTS = {"dimension_counts": ("category", "Questions per dimension", True),  # table -> label column, title, horizontal
         "funnel": ("step", "From generated to published", True),
         "answer_balance": ("answer", "Correct answer letter", False)}


def write_plots(tables: dict[str, pd.DataFrame], out_dir: Path) -> list[Path]:
    """The standard plot of each of `tables` that has one, as `<name>.png` in `out_dir`."""
    return [_bar_chart(list(tables[name][label]), list(tables[name]["count"]), title, out_dir / f"{name}.png", horizontal)
            for name, (label, title, horizontal) in PLOTS.items() if name in tables]


def stats_tables(frame: pd.DataFrame, statuses: str | list[str] | None = None) -> dict[str, pd.DataFrame]:
    """The standard tables: status x dimension and the funnel over everything, counts and answer
    balance over the chosen statuses."""
    chosen = frame if statuses is None else frame[frame["status"].isin(
        [statuses] if isinstance(statuses, str) else list(statuses))]
    return {"status_by_dimension": status_table(frame), "funnel": funnel(frame),
            "dimension_counts": dimension_counts(chosen), "answer_balance": answer_balance(chosen)}


def write_stats(tables: dict[str, pd.DataFrame], out_dir: Path) -> list[Path]:
    """Each table as CSV, and the standard plots as PNG."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        table.to_csv(out_dir / f"{name}.csv", index=False)
    return [out_dir / f"{name}.csv" for name in tables] + write_plots(tables, out_dir)


def markdown_table(frame: pd.DataFrame, empty: str = "(none)", cell=str) -> str:
    """`frame` as a markdown table, each value written by `cell`; `empty` when it has no rows."""
    if frame.empty:
        return empty
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])
