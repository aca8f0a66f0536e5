"""The run report: what a build did, as markdown with PNG plots.

It shows the funnel per dimension (generated → quality gate → blind filter → review → published), blind
accuracy before and after filtering, how often review changed each generator's answers or discarded its
questions, the questions waiting in review, answer balance, tokens and cost, time per stage, and failures by
reason. Everything is recomputed from the store, so a report can be made for any run at any time.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pandas as pd
import sqlalchemy as sa

from annotation.reconcile import ADJUDICATION
from annotation.settings import ReviewSettings
from benchsmith.dimensions import registry
from benchsmith.records import stable_hash
from benchsmith.status import BATCH_COLUMNS, batch_jobs
from benchsmith.store.schema import metadata, stage_runs, work_ledger
from publish.stats import FUNNEL_STEPS, answer_balance, markdown_table, question_frame, write_plots
from benchsmith.store import Store

def funnel_by_dimension(frame: pd.DataFrame) -> pd.DataFrame:
    """Per dimension, how many questions got at least as far as each step."""
    rows = [{"dimension_id": dimension, "category": category,
             **{step: int((group["reached"] >= i).sum()) for i, step in enumerate(FUNNEL_STEPS)}}
            for (dimension, category), group in frame.groupby(["dimension_id", "category"])]
    return pd.DataFrame(rows, columns=["dimension_id", "category", *FUNNEL_STEPS])


def stage_times(store: Store, run_id: str | None) -> pd.DataFrame:
    runs = store.get_stage_runs(run_id)
    rows = [{"run": r["run_id"], "stage": r["stage"], "status": r["status"],
             "seconds": round((r["finished_at"] - r["started_at"]).total_seconds(), 2) if r["finished_at"] else None}
            for r in runs]
    return pd.DataFrame(rows, columns=["run", "stage", "status", "seconds"])


def llm_costs(store: Store) -> pd.DataFrame:
    rows = [{"purpose": p, "model": m, "status": s, **totals} for (p, m, s), totals in store.llm_totals().items()]
    return pd.DataFrame(rows, columns=["purpose", "model", "status", "calls", "tokens_in", "tokens_out", "cost_usd"])


def failures(store: Store) -> pd.DataFrame:
    """Every failed check, extraction and LLM call, counted by stage and reason. A tie in review is not a
    failure: the question waits for a deciding annotation (see `review_section`)."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for (stage, rule, passed, reason), n in store.verdict_counts().items():
        if not passed and not (stage == "review" and reason.startswith(ADJUDICATION)):
            counts[(stage, rule)] += n
    for row in store.extraction_failures():
        counts[(f"extract:{row['extractor'].split(':')[0]}", row["reason"][:60] or "failed")] += 1
    for (purpose, _model, status), totals in store.llm_totals().items():
        if status != "ok":
            counts[(f"llm:{purpose}", status)] += totals["calls"]
    rows = [{"stage": stage, "reason": reason, "count": n} for (stage, reason), n in sorted(counts.items())]
    return pd.DataFrame(rows, columns=["stage", "reason", "count"])


def blind_accuracy(store: Store) -> pd.DataFrame:
    from filters.blind import ACCURACY_COLUMNS, accuracy_table, report

    return pd.DataFrame(accuracy_table(report(store)), columns=ACCURACY_COLUMNS)


def review_section(store: Store, review: ReviewSettings) -> list[str]:
    """The human-vs-generator signal, and how many questions wait in review (for annotators, or for a
    deciding annotation on a tie)."""
    from annotation.lifecycle import standing
    from annotation.questions import Questions
    from annotation.signal import COLUMNS, review_signal

    pending = standing(store, Questions(review, registry()))
    signal = pd.DataFrame(review_signal(store, registry()), columns=COLUMNS)
    return ["## Review against the generators\n",
            "Per generated dimension and generator: how often the annotators' answer differs from the generated "
            "key, how often they moved the question to another dimension, and how often they discarded it and "
            "why. A high rate is the main sign of a broken generator or of careless annotators.\n",
            _markdown(signal),
            f"Waiting in review: {pending['waiting']} for annotators ({review.overlap} review(s) each, "
            f"review.overlap), {pending['flagged']} for a deciding "
            "annotation (a tie; not a failure: `benchsmith review status --flagged` lists them).\n"]


def plot_funnel_by_dimension(table: pd.DataFrame, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, max(3.0, 0.5 * len(table) + 1.5)))
    height = 0.8 / len(FUNNEL_STEPS)
    for i, step in enumerate(FUNNEL_STEPS):
        ax.barh([y + i * height for y in range(len(table))], table[step], height=height, label=step)
    ax.set_yticks([y + 0.4 - height / 2 for y in range(len(table))], table["category"])
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title("Funnel per dimension")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


def _markdown(table: pd.DataFrame) -> str:
    return markdown_table(table, "_nothing yet_", lambda v: "" if pd.isna(v) else
                          f"{v:.3f}" if isinstance(v, float) else str(v)) + "\n"


def write_report(store: Store, out_dir: Path, run_id: str | None = None,
                 review: ReviewSettings | None = None) -> Path:
    """Write report.md and its plots into out_dir; return the markdown file. `review` (the settings
    section) says how many reviews decide a question."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frame = question_frame(store)
    funnel = funnel_by_dimension(frame)
    balance = answer_balance(frame[frame["status"].isin(["candidate", "in_review", "accepted", "published"])])
    costs = llm_costs(store)
    sections = [f"# benchsmith run report{f' — run {run_id}' if run_id else ''}\n",
                "## Funnel per dimension\n", _markdown(funnel)]
    if not funnel.empty:
        plot_funnel_by_dimension(funnel, out_dir / "funnel_by_dimension.png")
        sections.append("![funnel](funnel_by_dimension.png)\n")
    sections += ["## Blind accuracy before and after filtering\n",
                 "Share of option orders each text-only solver (the learned one included) answered right "
                 "without the image, on every judged question (before) and on the ones the filter kept "
                 "(after), with 95% Wilson intervals; chance is 1/options.\n", _markdown(blind_accuracy(store)),
                 *review_section(store, review or ReviewSettings()),
                 "## Answer balance (questions still in play)\n", _markdown(balance)]
    if int(balance["count"].sum()):
        write_plots({"answer_balance": balance}, out_dir)
        sections.append("![answer balance](answer_balance.png)\n")
    total_cost = float(costs["cost_usd"].sum()) if not costs.empty else 0.0
    sections += [f"## Tokens and cost (total ${total_cost:.4f})\n", _markdown(costs)]
    if jobs := batch_jobs(store.get_llm_batches()):
        sections += ["## LLM batch jobs\n", "Cost at batch prices beside what live calls would have cost; "
                     "estimates until a job is collected (`benchsmith llm batches collect`).\n",
                     _markdown(pd.DataFrame(jobs, columns=BATCH_COLUMNS))]
    sections += ["## Time per stage\n", _markdown(stage_times(store, run_id)),
                 "## Failures by reason\n", _markdown(failures(store))]
    names = ", ".join(f"{d.id} {d.name}" for d in registry())
    sections.append(f"\n_Dimensions: {names}._\n")
    path = out_dir / "report.md"
    path.write_text("\n".join(sections), encoding="utf-8")
    return path


def content_token(store: Store) -> str:
    """A cheap token of what a report shows: each table's row count and newest row, or latest update (status moves
    are rows too, as events), without stage timings and the report's own ledger rows: a rerun that changed nothing
    keeps the last report."""
    def times(table: sa.Table) -> list:
        return [sa.func.max(table.c[name]) for name in ("created_at", "updated_at", "finished_at") if name in table.c]

    with store.engine.connect() as conn:
        parts = [(table.name, *map(str, conn.execute(
            sa.select(sa.func.count(), *times(table))
            .where(work_ledger.c.stage != "report" if table is work_ledger else sa.true())).one()))
                 for table in metadata.sorted_tables if times(table) and table is not stage_runs]
    return stable_hash(store.store_id, parts)
