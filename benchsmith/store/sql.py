"""Dialect-neutral query and insert helpers shared by the store mixins."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa

CHUNK = 500  # keeps IN lists and parameter counts well under every backend's limits


def chunks(values: Sequence[Any], size: int = CHUNK) -> Iterable[Sequence[Any]]:
    for start in range(0, len(values), size):
        yield values[start:start + size]


def select_in(conn: sa.Connection, query: sa.Select, column: sa.Column, values: Sequence[Any] | None) -> list:
    """The rows of `query`: all of them when `values` is None, else those whose `column` is in `values`
    (asked in chunks, each chunk in the query's order)."""
    if values is None:
        return list(conn.execute(query))
    return [row for batch in chunks(list(values)) for row in conn.execute(query.where(column.in_(batch)))]


def where_status(query: sa.Select, column: sa.Column, status: str | Sequence[str] | None) -> sa.Select:
    """`query` narrowed to one status, to any of several, or (None) left as it is."""
    if status is None:
        return query
    return query.where(column == status if isinstance(status, str) else column.in_(list(status)))


def count_by(engine: sa.Engine, *columns: sa.Column, where: Sequence[sa.ColumnElement] = ()) -> dict[tuple, int]:
    """How many rows (of those matching `where`) hold each combination of values of `columns`."""
    query = sa.select(*columns, sa.func.count()).where(*where).group_by(*columns)
    with engine.connect() as conn:
        return {tuple(row[:-1]): row[-1] for row in conn.execute(query)}


def _insert(conn: sa.Connection, table: sa.Table):
    # imported here: the postgresql package loads every driver's dialect (~60 ms) that SQLite users never need
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(table)


def insert_new(conn: sa.Connection, table: sa.Table, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Insert rows whose primary key is not there yet; return the rows that were new.

    Safe against a concurrent writer: a key that appears in between is skipped, not an error.
    """
    keys = [col.name for col in table.primary_key.columns]
    unique: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        unique.setdefault(tuple(row[k] for k in keys), row)
    new: list[dict[str, Any]] = []
    for batch in chunks(list(unique.items())):
        if len(keys) == 1:
            col = table.c[keys[0]]
            have = {(k,) for k in conn.scalars(sa.select(col).where(col.in_([key[0] for key, _ in batch])))}
        else:
            cond = sa.or_(*[sa.and_(*[table.c[k] == v for k, v in zip(keys, key)]) for key, _ in batch])
            have = {tuple(r) for r in conn.execute(sa.select(*[table.c[k] for k in keys]).where(cond))}
        fresh = [row for key, row in batch if key not in have]
        if fresh:
            conn.execute(_insert(conn, table).on_conflict_do_nothing(index_elements=keys), fresh)
            new.extend(fresh)
    return new


def upsert(conn: sa.Connection, table: sa.Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows, or overwrite the non-key columns of rows that exist."""
    if not rows:
        return
    keys = [col.name for col in table.primary_key.columns]
    for batch in chunks(list(rows)):
        stmt = _insert(conn, table)
        updates = {c: stmt.excluded[c] for c in batch[0] if c not in keys}
        conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=updates), list(batch))
