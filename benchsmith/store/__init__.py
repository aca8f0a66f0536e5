"""The SQL store that holds the state of every item, fact, question and review.

SQLite (one file) by default, PostgreSQL by URL. The schema is versioned with Alembic; opening a
store migrates it forward, or says clearly why it cannot.
"""

from __future__ import annotations

from benchsmith.errors import BenchsmithError

from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa

from benchsmith.store.conversations import ConversationsMixin
from benchsmith.store.evals import EvalsMixin
from benchsmith.store.facts import FactsMixin
from benchsmith.store.items import ItemsMixin
from benchsmith.store.ledger import LedgerMixin
from benchsmith.store.llm_calls import LlmCallsMixin
from benchsmith.store.questions import QuestionsMixin
from benchsmith.store.rate_buckets import RateBucketsMixin
from benchsmith.store.releases import ReleasesMixin
from benchsmith.store.reviews import ReviewsMixin
from benchsmith.store.runs import RunsMixin
from benchsmith.store.verdicts import VerdictsMixin

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# The newest migration's revision: a store already there opens without importing alembic (~0.15 s a
# command). A test holds it equal to alembic's own head.
SCHEMA_HEAD = "0007"


class StoreError(BenchsmithError, RuntimeError):
    """The store cannot be opened or used as asked; the message says what to do."""


def alembic_config():
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def _make_engine(url: str) -> sa.Engine:
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 60})

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):
            # Let SQLAlchemy, not the sqlite3 module, open transactions, so DDL (migrations) is
            # transactional too; WAL lets readers run beside one writer.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            # a checkpoint (the one fsync of WAL mode) every 64 MB of changes, not every 4 MB: a generate
            # commit writes a few MB, and the checkpoints after each took as long as the writes
            cursor.execute("PRAGMA wal_autocheckpoint=16384")
            cursor.execute("PRAGMA busy_timeout=60000")
            cursor.close()

        @sa.event.listens_for(engine, "begin")
        def _begin(conn):
            # IMMEDIATE takes the write lock up front: two processes never deadlock upgrading a read.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


def migrate(engine: sa.Engine, revision: str = "head") -> None:
    """Bring the schema to `revision`, refusing stores this code does not know."""
    if revision == "head" and _stored_revision(engine) == SCHEMA_HEAD:
        return
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    config = alembic_config()
    script = ScriptDirectory.from_config(config)
    known = {rev.revision for rev in script.walk_revisions()}
    with engine.begin() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
        tables = set(sa.inspect(conn).get_table_names()) - {"alembic_version"}
        if current is None and tables:
            raise StoreError(
                f"the database at {engine.url.render_as_string(hide_password=True)} has tables "
                f"({', '.join(sorted(tables)[:5])}) but no benchsmith schema version; "
                "point BENCHSMITH_DB_URL at an empty database or a benchsmith store"
            )
        if current is not None and current not in known:
            raise StoreError(
                f"this store has schema version {current}, which is newer than this benchsmith "
                f"knows (latest {script.get_current_head()}); upgrade benchsmith to open it"
            )
        if revision == "head" and current == script.get_current_head():
            return
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def _stored_revision(engine: sa.Engine) -> str | None:
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return None
        return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


SQLITE_MAGIC = b"SQLite format 3\x00"
URL_HELP = "set BENCHSMITH_DB_URL to sqlite:///path/to/benchsmith.db or postgresql://user@host/dbname"


def _check_url(url: str) -> None:
    """Refuse, with what to do, a URL that names no store this code can open, before connecting."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise StoreError(f"the store URL is not a database URL; {URL_HELP}") from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(f"the store must be SQLite or PostgreSQL, not {backend}; {URL_HELP}")
    if backend == "sqlite" and parsed.database and parsed.database != ":memory:":
        path = Path(parsed.database).expanduser()
        if path.is_dir():
            raise StoreError(f"the store path {path} is a folder; name a file in it ({URL_HELP})")
        if path.is_file() and path.stat().st_size:
            with path.open("rb") as handle:
                if handle.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                    raise StoreError(f"{path} is not an SQLite database; point BENCHSMITH_DB_URL at a benchsmith "
                                     "store, or at a new file to start one")


def damaged_store_message(where: str, exc: sa.exc.DatabaseError) -> str:
    return (f"the store{where} is damaged ({exc.orig}); restore it from your last backup or copy "
            "(for SQLite, the .db file together with its -wal file), or move it aside to start a new store")


class Store(
    ItemsMixin, FactsMixin, QuestionsMixin, VerdictsMixin, LlmCallsMixin, ReviewsMixin, ReleasesMixin,
    RunsMixin, LedgerMixin, EvalsMixin, ConversationsMixin, RateBucketsMixin,
):
    """All persistent state. Methods are grouped by record in the mixins beside this file."""

    def __init__(self, url: str) -> None:
        self.url = url
        _check_url(url)
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self.engine = _make_engine(url)
        try:
            migrate(self.engine)
        except sa.exc.OperationalError as exc:
            self.engine.dispose()
            raise StoreError(
                f"cannot open the store at {sa.make_url(url).render_as_string(hide_password=True)}: "
                f"{exc.orig}".strip()
            ) from None
        except sa.exc.DatabaseError as exc:
            self.engine.dispose()
            raise StoreError(damaged_store_message(
                f" at {sa.make_url(url).render_as_string(hide_password=True)}", exc)) from None

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def store_id(self) -> str:
        """A random id fixed when the store was created: a new store never matches an old cache."""
        from benchsmith.store.schema import store_info

        with self.engine.connect() as conn:
            return conn.scalar(sa.select(store_info.c.value).where(store_info.c.key == "store_id"))

    def state_token(self, tables: Sequence[str] | None = None) -> str:
        """Changes when the named tables (None: all) gain rows. Rows that only change status do not
        count, so a stage whose outputs land in its own input tables still sees a stable token."""
        from benchsmith.records import stable_hash
        from benchsmith.store.schema import metadata

        parts = [self.store_id]
        with self.engine.connect() as conn:
            for table in metadata.sorted_tables:
                if tables is not None and table.name not in tables or "created_at" not in table.c:
                    continue
                count, latest = conn.execute(sa.select(sa.func.count(), sa.func.max(table.c.created_at))).one()
                parts.append((table.name, count, str(latest)))
        return stable_hash(parts)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


__all__ = ["Store", "StoreError", "migrate", "alembic_config"]
