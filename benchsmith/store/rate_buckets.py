"""Token buckets in the store, so a rate limit holds across every process that uses the store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from benchsmith.store.schema import rate_buckets
from benchsmith.store.sql import insert_new

Levels = dict[str, float]  # "requests" and "tokens" left in the bucket


def _database_clock(dialect: str) -> sa.ColumnElement[float]:
    """Seconds since the epoch on the database's clock: one clock for workers whose own clocks disagree."""
    if dialect == "postgresql":
        return sa.cast(sa.extract("epoch", sa.func.clock_timestamp()), sa.Float)
    return (sa.func.julianday("now") - 2440587.5) * 86400.0


class RateBucketsMixin:
    engine: sa.Engine

    def update_rate_bucket(self, name: str, change: Callable[[Levels, float], tuple[Levels, Any]]) -> Any:
        """Read, change and write bucket `name` in one short transaction that holds its row (PostgreSQL:
        SELECT ... FOR UPDATE; SQLite: the store's BEGIN IMMEDIATE takes the write lock first).
        `change(levels, elapsed_s)` gets the bucket's levels and the seconds since its last change on the
        database's clock, and returns the new levels and a result, which this returns. A new bucket is
        empty as of the epoch: to any refill, full."""
        c = rate_buckets.c
        query = sa.select(c.requests, c.tokens, c.stamp, _database_clock(self.engine.dialect.name)) \
            .where(c.name == name).with_for_update()
        with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # a bucket's last changes lost in a crash cost nothing: commit without waiting for the disk
                conn.exec_driver_sql("SET LOCAL synchronous_commit TO OFF")
            row = conn.execute(query).first()
            if row is None:
                insert_new(conn, rate_buckets, [{"name": name, "requests": 0.0, "tokens": 0.0, "stamp": 0.0}])
                row = conn.execute(query).first()
            requests, tokens, stamp, now = row
            # a clock read before the row lock was granted can be older than the holder's stamp: the time
            # in between is counted by the next change instead, never twice
            levels, result = change({"requests": requests, "tokens": tokens}, max(0.0, now - stamp))
            conn.execute(rate_buckets.update().where(c.name == name).values(**levels, stamp=max(stamp, now)))
        return result
