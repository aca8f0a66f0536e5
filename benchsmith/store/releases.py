"""Published releases and the items each holds. Filled in by publish."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import sqlalchemy as sa

from benchsmith.records import Release, utcnow
from benchsmith.store.schema import release_entries, releases
from benchsmith.store.sql import chunks


class ReleasesMixin:
    engine: sa.Engine

    def add_release(self, release: Release, hashes: Mapping[str, Mapping[str, str]]) -> None:
        """Record a release and the content hash of every item in it (kind -> {id: hash}), in one transaction."""
        with self.engine.begin() as conn:
            conn.execute(sa.insert(releases).values(
                version=release.version, path=release.path, n_questions=len(hashes.get("question", {})),
                changelog=release.changelog, meta=release.meta, created_at=utcnow()))
            rows = [{"version": release.version, "subject_id": sid, "kind": kind, "content_hash": digest}
                    for kind, by_id in hashes.items() for sid, digest in sorted(by_id.items())]
            for batch in chunks(rows):
                conn.execute(sa.insert(release_entries), list(batch))

    def get_releases(self) -> list[Release]:
        """Every release, oldest first, with its question ids."""
        t = release_entries
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(releases).order_by(releases.c.created_at, releases.c.version)).all()
            members: dict[str, list[str]] = defaultdict(list)
            for version, qid in conn.execute(sa.select(t.c.version, t.c.subject_id).where(t.c.kind == "question")
                                             .order_by(t.c.subject_id)):
                members[version].append(qid)
        return [Release(version=row.version, question_ids=members[row.version], path=row.path, changelog=row.changelog,
                        meta=row.meta | {"created_at": row.created_at.isoformat()}) for row in rows]
