"""Items: ingested images and videos, and sets of stored images."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import sqlalchemy as sa

from benchsmith.records import Image, ImageSet, Item, Video, utcnow
from benchsmith.store.schema import items
from benchsmith.store.sql import chunks, count_by, insert_new, select_in

_COLUMNS = ("id", "kind", "path", "width", "height", "source", "license", "original_name", "annotations")


_META = {"image": ("phash",), "video": ("fps", "n_frames", "frames"), "image_set": ("images", "paths")}
_RECORDS = {"image": Image, "video": Video, "image_set": ImageSet}


def _to_row(item: Item) -> dict:
    row = {c: getattr(item, c) for c in _COLUMNS}
    meta = {key: getattr(item, key) for key in _META[item.kind]}
    return row | {"meta": meta, "status": "ok", "created_at": utcnow()}


def _from_row(row) -> Item:
    fields = {c: getattr(row, c) for c in _COLUMNS if c not in ("kind", "path")} | row.meta
    if row.kind != "image_set":
        fields["path"] = row.path
    return _RECORDS[row.kind](**fields)


def _query(kind: str | None, status: str | None) -> sa.Select:
    """Items of this kind and status (either None: any), oldest first."""
    query = sa.select(items).order_by(items.c.created_at, items.c.id)
    if kind:
        query = query.where(items.c.kind == kind)
    return query.where(items.c.status == status) if status else query


class ItemsMixin:
    engine: sa.Engine

    def add_items(self, records: Sequence[Item]) -> int:
        """Store items that are not there yet; return how many were new."""
        with self.engine.begin() as conn:
            return len(insert_new(conn, items, [_to_row(r) for r in records]))

    def known_item_ids(self, ids: Sequence[str]) -> set[str]:
        with self.engine.connect() as conn:
            return {row.id for row in select_in(conn, sa.select(items.c.id), items.c.id, ids)}

    def item_ids(self, *, kind: str, status: str = "ok") -> list[str]:
        """Ids of the items of this kind and status, oldest first."""
        query = (sa.select(items.c.id).where(items.c.kind == kind, items.c.status == status)
                 .order_by(items.c.created_at, items.c.id))
        with self.engine.connect() as conn:
            return list(conn.scalars(query))

    def get_items(self, ids: Sequence[str] | None = None, *, kind: str | None = None,
                  status: str | None = "ok") -> list[Item]:
        query = _query(kind, status)
        with self.engine.connect() as conn:
            return [_from_row(r) for r in select_in(conn, query, items.c.id, ids)]

    def add_item_annotations(self, key: str, entries: dict[str, list[dict]]) -> int:
        """Append entries to the list `annotations[key]` of stored items, skipping those already there;
        return how many were added."""
        added = 0
        with self.engine.begin() as conn:
            for item_id, new in entries.items():
                annotations = conn.scalar(sa.select(items.c.annotations).where(items.c.id == item_id))
                if annotations is None:
                    continue
                present = list(annotations.get(key) or [])
                fresh = [e for e in new if e not in present]
                if fresh:
                    conn.execute(sa.update(items).where(items.c.id == item_id).values(
                        annotations=annotations | {key: present + fresh}))
                    added += len(fresh)
        return added

    def iter_items(self, *, kind: str | None = None, status: str | None = "ok",
                   chunk: int = 2000) -> Iterator[Item]:
        """Like `get_items()`, but read from the database `chunk` rows at a time: a stage that only
        needs each item once never holds the whole collection."""
        query = _query(kind, status)
        with self.engine.connect() as conn:
            for row in conn.execution_options(stream_results=True, yield_per=chunk).execute(query):
                yield _from_row(row)

    def image_hashes(self) -> list[tuple[str, str, str, str]]:
        """(id, original name, path, perceptual hash or "" when none was taken) of every stored image,
        whatever its status, oldest first."""
        c = items.c
        query = sa.select(c.id, c.original_name, c.path, c.meta).where(c.kind == "image").order_by(c.created_at, c.id)
        with self.engine.connect() as conn:
            return [(row.id, row.original_name, row.path, (row.meta or {}).get("phash", "")) for row in conn.execute(query)]

    def set_image_hashes(self, hashes: dict[str, str]) -> None:
        """Record the perceptual hashes of stored images (id -> hash) taken after they were stored."""
        with self.engine.begin() as conn:
            for item_id, phash in hashes.items():
                conn.execute(items.update().where(items.c.id == item_id, items.c.kind == "image")
                             .values(meta={"phash": phash}))

    def set_item_status(self, ids: Sequence[str], status: str) -> None:
        with self.engine.begin() as conn:
            for batch in chunks(list(ids)):
                conn.execute(sa.update(items).where(items.c.id.in_(batch)).values(status=status))

    def item_counts(self) -> dict[tuple[str, str], int]:
        """(kind, status) -> count."""
        return count_by(self.engine, items.c.kind, items.c.status)
