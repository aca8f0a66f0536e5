"""What does the store-held LLM rate limit cost each call?

Every call under `requests_per_minute` / `tokens_per_minute` takes from its endpoint+model bucket in the
store: one short transaction (PostgreSQL: SELECT ... FOR UPDATE then UPDATE; SQLite: the same under
BEGIN IMMEDIATE). This times `RateLimiter.acquire` as the LLM client calls it (from its event loop, the
store call in a thread) with a limit high enough never to wait, so what is timed is the transaction and
the thread hop alone; the in-process bucket (a client with no store) is timed beside it. Reported per
backend: the median and 90th percentile seconds per acquire over `--acquires` acquires, each of `--repeats`
runs on a fresh store, and the median of the run medians. PostgreSQL is measured when `--pg-url` (or
BENCHSMITH_TEST_PG_URL) names a server where this may create and drop a database.
Results: benchmarks/results/rate_limit_overhead.json.

    .venv/bin/python benchmarks/rate_limit_overhead.py --pg-url postgresql+psycopg://postgres@127.0.0.1:5432/postgres
    .venv/bin/python benchmarks/rate_limit_overhead.py --quick      # SQLite only unless a URL is given
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).parent / "results"
NEVER_BINDS = 1e12  # requests and tokens per minute: every acquire is granted at once


def _times(limiter, acquires: int) -> list[float]:
    async def run() -> list[float]:
        await limiter.acquire(100)  # the first one pays for the connection and the bucket row
        seconds = []
        for _ in range(acquires):
            started = time.perf_counter()
            await limiter.acquire(100)
            seconds.append(time.perf_counter() - started)
        return seconds

    return asyncio.run(run())


def _summary(runs: list[list[float]]) -> dict:
    medians = [statistics.median(run) for run in runs]
    every = sorted(s for run in runs for s in run)
    return {"median_s": statistics.median(medians), "run_medians_s": medians,
            "p90_s": every[int(0.9 * (len(every) - 1))], "acquires": len(every)}


def _database(admin_url: str):
    """A new database on the server for one run, dropped afterwards: yields its URL."""
    name = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--acquires", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pg-url", default=os.environ.get("BENCHSMITH_TEST_PG_URL", ""),
                        help="a PostgreSQL server URL with the right to create databases")
    parser.add_argument("--quick", action="store_true", help="100 acquires, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.acquires, args.repeats = 100, 1

    from benchsmith.llm import RateLimiter
    from benchsmith.store import Store

    bucket = "http://bench/v1 m"
    result: dict = {"acquires": args.acquires, "repeats": args.repeats,
                    "in_process": _summary([_times(RateLimiter(NEVER_BINDS, NEVER_BINDS), args.acquires)
                                            for _ in range(args.repeats)])}
    runs = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as folder, Store(f"sqlite:///{folder}/store.db") as store:
            runs.append(_times(RateLimiter(NEVER_BINDS, NEVER_BINDS, store, bucket), args.acquires))
    result["sqlite"] = _summary(runs)
    if args.pg_url:
        runs = []
        for _ in range(args.repeats):
            for url in _database(args.pg_url):
                with Store(url) as store:
                    runs.append(_times(RateLimiter(NEVER_BINDS, NEVER_BINDS, store, bucket), args.acquires))
        result["postgresql"] = _summary(runs)
    else:
        result["postgresql"] = "not measured: no --pg-url"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "rate_limit_overhead.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({name: value["median_s"] if isinstance(value, dict) else value
                      for name, value in result.items() if name not in ("acquires", "repeats")}, indent=2))


if __name__ == "__main__":
    main()
