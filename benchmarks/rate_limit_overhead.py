"""What does the store-held LLM rate limit cost each call?

Every call under `requests_per_minute` / `tokens_per_minute` takes from its endpoint+model bucket in the
store: one short transaction (PostgreSQL: SELECT ... FOR UPDATE then UPDATE; SQLite: the same under
BEGIN IMMEDIATE). This times `RateLimiter.acquire` as the LLM client calls it (from its event loop, the
store call in a thread) with a limit high enough never to wait, so what is timed is the transaction and
the thread hop alone; the in-process bucket (a client with no store) is timed beside it. Reported per
backend: the median and 90th percentile seconds per acquire over `--acquires` acquires, each of `--repeats`
runs on a fresh store, and the median of the run medians. PostgreSQL: a throwaway server this starts, or
the one `--pg-url` (or BENCHSMITH_TEST_PG_URL) names, where it may create and drop a database.
Results: benchmarks/results/rate_limit_overhead.json.

    .venv/bin/python benchmarks/rate_limit_overhead.py
    .venv/bin/python benchmarks/rate_limit_overhead.py --quick      # 100 acquires, 1 repeat
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, save  # noqa: E402
from tests.support.services import fresh_database, postgres_server  # noqa: E402

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


if __name__ == "__main__":
    args = arguments(__doc__, {"acquires": 100, "repeats": 1}, acquires=300, repeats=3,
                     pg_url=os.environ.get("BENCHSMITH_TEST_PG_URL", "")).parse_args()

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
    runs = []
    with ExitStack() as stack:
        admin_url = args.pg_url or stack.enter_context(postgres_server())
        for _ in range(args.repeats):
            with fresh_database(admin_url) as url, Store(url) as store:
                runs.append(_times(RateLimiter(NEVER_BINDS, NEVER_BINDS, store, bucket), args.acquires))
    result["postgresql"] = _summary(runs)
    save("rate_limit_overhead", result)
