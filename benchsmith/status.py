"""What state the store is in: counts per stage, status and dimension."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.table import Table

from benchsmith.console import table
from benchsmith.dimensions import registry
from benchsmith.records import TRANSITIONS, aware, utcnow
from benchsmith.store import Store

QUESTION_STATUSES = list(TRANSITIONS)


def store_status(store: Store) -> dict[str, Any]:
    items = {f"{kind}/{status}": n for (kind, status), n in sorted(store.item_counts().items())}
    refused: dict[str, int] = defaultdict(int)
    checks: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for (stage, rule, passed, _reason), n in store.verdict_counts().items():
        if stage == "ingest":
            refused[rule] += n
        else:
            checks[stage]["passed" if passed else f"failed:{rule}"] += n
    by_dimension: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(QUESTION_STATUSES, 0))
    for (dimension, status), n in store.question_counts().items():
        by_dimension[dimension][status] = n
    return {
        "items": items,
        "refused_inputs": dict(sorted(refused.items())),
        "checks": {stage: dict(v) for stage, v in sorted(checks.items())},
        "extractions": {f"{e} [{s}]": n for (e, s), n in sorted(store.extraction_counts().items())},
        "questions": {d: by_dimension[d] for d in sorted(by_dimension)},
        "conversations": {status: n for status, n in sorted(store.status_counts("conversation").items())},
        "llm": {f"{p}/{m}/{s}": v for (p, m, s), v in sorted(store.llm_totals().items())},
        "llm_batches": batch_jobs(store.get_llm_batches()),
    }


BATCH_COLUMNS = ["job", "model", "status", "requests", "answered", "failed", "malformed", "age", "cost_usd",
                 "live_cost_usd"]


def batch_jobs(batches: list[dict]) -> list[dict[str, Any]]:
    """One row per LLM batch job (rows of `Store.get_llm_batches`): its requests, answers, age, and its
    cost at batch prices beside what live calls would have cost (estimates until it is collected)."""
    now = utcnow()
    rows = []
    for b in batches:
        age = int((aware(b["finished_at"] or now) - aware(b["created_at"])).total_seconds() // 60)
        rows.append({"job": b["job_id"] or b["id"], **{k: b[k] for k in BATCH_COLUMNS[1:7]},
                     "age": f"{age // 60}h{age % 60:02d}m", "cost_usd": round(b["cost_usd"], 6),
                     "live_cost_usd": round(b["live_cost_usd"], 6)})
    return rows


def status_tables(status: dict[str, Any]) -> list[Table]:
    tables = [table("Items", ["kind/status", "n"], list(status["items"].items()) or [("(none)", 0)])]
    if status["refused_inputs"]:
        tables.append(table("Refused inputs", ["reason", "n"], list(status["refused_inputs"].items())))
    if status["checks"]:
        tables.append(table("Checks", ["stage", "outcome", "n"],
                            [(s, o, n) for s, outcomes in status["checks"].items() for o, n in outcomes.items()]))
    if status["extractions"]:
        tables.append(table("Extractions", ["extractor [status]", "n"], list(status["extractions"].items())))
    if status["questions"]:
        names = {d.id: d.name for d in registry()}
        rows = [(f"{d} {names.get(d, '?')}", *counts.values(), sum(counts.values()))
                for d, counts in status["questions"].items()]
        totals = [sum(r[i] for r in rows) for i in range(1, len(QUESTION_STATUSES) + 2)]
        tables.append(table("Questions", ["dimension", *QUESTION_STATUSES, "total"], [*rows, ("all", *totals)]))
    if status["conversations"]:
        counts = status["conversations"]
        tables.append(table("Conversations", ["status", "n"], [*counts.items(), ("all", sum(counts.values()))]))
    if status["llm"]:
        tables.append(table("LLM calls", ["purpose/model/status", "calls", "tokens in", "tokens out", "cost $"],
                            [(k, v["calls"], v["tokens_in"], v["tokens_out"], f"{v['cost_usd']:.4f}")
                             for k, v in status["llm"].items()]))
    if status["llm_batches"]:
        tables.append(batch_table(status["llm_batches"]))
    return tables


def batch_table(jobs: list[dict[str, Any]]) -> Table:
    return table("LLM batch jobs (cost: estimated until collected)",
                 [*BATCH_COLUMNS[:-2], "cost $ (batch)", "cost $ (live)"],
                 [[*(job[k] for k in BATCH_COLUMNS[:-2]), f"{job['cost_usd']:.4f}", f"{job['live_cost_usd']:.4f}"]
                  for job in jobs])
