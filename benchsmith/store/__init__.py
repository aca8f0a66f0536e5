"""The SQL store that holds the state of every item, fact, question and review.

SQLite (one file) by default, PostgreSQL by URL. The schema is versioned with Alembic; opening a
store migrates it forward, or says clearly why it cannot.
"""

from __future__ import annotations

from benchsmith.errors import BenchsmithError

import sqlite3
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa

from benchsmith.store.conversations import ConversationsMixin
from benchsmith.store.evals import EvalsMixin
from benchsmith.store.facts import FactsMixin
from benchsmith.store.items import ItemsMixin
from benchsmith.store.lifecycle import ContradictionError, LifecycleMixin, TransitionError
from benchsmith.store.ledger import LedgerMixin
from benchsmith.store.llm_batches import LlmBatchesMixin
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
SCHEMA_HEAD = "0011"


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
            raise StoreError(_foreign_message(engine.url, tables))
        if current is not None and current not in known:
            raise StoreError(
                f"this store has schema version {current}, which is newer than this benchsmith "
                f"knows (latest {script.get_current_head()}); upgrade benchsmith to open it"
            )
        if revision == "head" and current == script.get_current_head():
            return
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def _foreign_message(url: sa.URL, tables: set[str]) -> str:
    return (f"the database at {url.render_as_string(hide_password=True)} has tables "
            f"({', '.join(sorted(tables)[:5])}) but no benchsmith schema version; "
            "point BENCHSMITH_DB_URL at an empty database or a benchsmith store")


def _stored_revision(engine: sa.Engine) -> str | None:
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return None
        return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


SQLITE_MAGIC = b"SQLite format 3\x00"
URL_HELP = "set BENCHSMITH_DB_URL to sqlite:///path/to/benchsmith.db or postgresql://user@host/dbname"


def _check_url(url: str) -> Path | None:
    """Refuse, with what to do, a URL that names no store this code can open, before connecting; the
    resolved path of an SQLite file, else None."""
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
        return path.resolve()
    return None


def damaged_store_message(where: str, exc: sa.exc.DatabaseError | sqlite3.DatabaseError | str) -> str:
    why = exc.orig if isinstance(exc, sa.exc.DatabaseError) else exc
    return (f"the store{where} is damaged ({why}); restore it from your last backup or copy "
            "(for SQLite, the .db file together with its -wal file), or move it aside to start a new store")


# Files this process found sound: a build opens its store once per stage, and pays the check once.
_SOUND: set[Path] = set()


def _inspect_sqlite(path: Path) -> bool:
    """Whether the file holds a benchsmith schema, read through a read-only connection before any
    writing pragma: a foreign or damaged file is refused untouched."""
    if path in _SOUND:
        return True
    where = f" at {path}"
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=60)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the store{where}: {exc}") from None
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "alembic_version" not in tables:
            raise StoreError(_foreign_message(sa.make_url(f"sqlite:///{path}"), tables))
        # quick_check reads every page once (O(N), no index cross-checks): damage is found on open, not
        # half-way through a command that would otherwise go on over missing rows
        found = [row for (row,) in conn.execute("PRAGMA quick_check(3)")]
        if found != ["ok"]:
            problems = [line for row in found for line in row.splitlines() if not line.startswith("***")]
            raise StoreError(damaged_store_message(where, "; ".join(problems)))
    except sqlite3.OperationalError as exc:
        raise StoreError(f"cannot open the store{where}: {exc}") from None
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        raise StoreError(damaged_store_message(where, exc)) from None
    finally:
        conn.close()
    if "alembic_version" in tables:
        _SOUND.add(path)
    return "alembic_version" in tables


def _missing_message(where: str) -> str:
    return (f"there is no benchsmith store at {where}; run `benchsmith ingest` or `benchsmith build` to start "
            "one, or point --workspace (or BENCHSMITH_DB_URL) at the store you mean")


class Store(
    LifecycleMixin, ItemsMixin, FactsMixin, QuestionsMixin, VerdictsMixin, LlmCallsMixin, ReviewsMixin, ReleasesMixin,
    RunsMixin, LedgerMixin, EvalsMixin, ConversationsMixin, RateBucketsMixin, LlmBatchesMixin,
):
    """All persistent state. Methods are grouped by record in the mixins beside this file."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        """Open (migrating) the store at `url`; with create=False (read-only commands) a store that is not
        there yet is an error naming where it was looked for, and nothing is created."""
        self.url = url
        path = _check_url(url)
        if path is not None:
            exists = path.is_file() and path.stat().st_size > 0 and _inspect_sqlite(path)
            if not exists and not create:
                raise StoreError(_missing_message(str(path)))
            path.parent.mkdir(parents=True, exist_ok=True)
        self.engine = _make_engine(url)
        shown = sa.make_url(url).render_as_string(hide_password=True)
        try:
            if path is None and not create and _stored_revision(self.engine) is None:
                raise StoreError(_missing_message(shown))
            migrate(self.engine)
        except (StoreError, sa.exc.DatabaseError) as exc:
            self.engine.dispose()
            if isinstance(exc, StoreError):
                raise
            if isinstance(exc, sa.exc.OperationalError):
                raise StoreError(f"cannot open the store at {shown}: {exc.orig}".strip()) from None
            raise StoreError(damaged_store_message(f" at {shown}", exc)) from None

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def store_id(self) -> str:
        """A random id fixed when the store was created: a new store never matches an old cache."""
        from benchsmith.store.schema import store_info

        with self.engine.connect() as conn:
            return conn.scalar(sa.select(store_info.c.value).where(store_info.c.key == "store_id"))

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


__all__ = ["Store", "StoreError", "TransitionError", "ContradictionError", "migrate", "alembic_config"]
