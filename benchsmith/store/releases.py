"""Published releases and the questions each holds. Filled in by publish."""

from __future__ import annotations

from collections import defaultdict

import sqlalchemy as sa

from benchsmith.records import Release, utcnow
from benchsmith.store.schema import release_conversations, release_questions, releases
from benchsmith.store.sql import chunks


def _release(row, question_ids: list[str]) -> Release:
    return Release(version=row.version, question_ids=question_ids, path=row.path, changelog=row.changelog,
                   meta=row.meta | {"created_at": row.created_at.isoformat()})


class ReleasesMixin:
    engine: sa.Engine

    def add_release(self, release: Release, content_hashes: dict[str, str],
                    conversation_hashes: dict[str, str] | None = None) -> None:
        """Record a release and the content hash of each question (and conversation) in it, in one
        transaction."""
        with self.engine.begin() as conn:
            conn.execute(sa.insert(releases).values(
                version=release.version, path=release.path, n_questions=len(release.question_ids),
                changelog=release.changelog, meta=release.meta, created_at=utcnow()))
            rows = [{"version": release.version, "question_id": qid, "content_hash": content_hashes[qid]}
                    for qid in release.question_ids]
            for batch in chunks(rows):
                conn.execute(sa.insert(release_questions), list(batch))
            rows = [{"version": release.version, "conversation_id": cid, "content_hash": digest}
                    for cid, digest in (conversation_hashes or {}).items()]
            for batch in chunks(rows):
                conn.execute(sa.insert(release_conversations), list(batch))

    def get_releases(self) -> list[Release]:
        """Every release, oldest first, with its question ids."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(releases).order_by(releases.c.created_at, releases.c.version)).all()
            members: dict[str, list[str]] = defaultdict(list)
            for version, qid in conn.execute(sa.select(release_questions.c.version, release_questions.c.question_id)
                                             .order_by(release_questions.c.question_id)):
                members[version].append(qid)
        return [_release(row, members[row.version]) for row in rows]

    def release_hashes(self, version: str) -> dict[str, str]:
        """question id -> content hash, as published in `version`."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(release_questions.c.question_id, release_questions.c.content_hash)
                                .where(release_questions.c.version == version))
            return dict(rows.all())

    def release_conversation_hashes(self, version: str) -> dict[str, str]:
        """conversation id -> content hash, as published in `version`."""
        t = release_conversations
        with self.engine.connect() as conn:
            return dict(conn.execute(sa.select(t.c.conversation_id, t.c.content_hash).where(t.c.version == version)).all())
