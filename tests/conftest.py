"""Shared fixtures: real services started once for the test session (PostgreSQL, Prefect, Label Studio),
and small stores.

PostgreSQL: `.ci/run` starts a server and sets BENCHSMITH_TEST_PG_URL. Without it, the fixture starts
a throwaway cluster itself with Debian's PostgreSQL binaries, so the PostgreSQL tests never skip
silently: they run, or they fail saying what is missing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from annotation.server import executable, install, start, stop
from annotation.settings import ReviewSettings
from benchsmith.settings import Settings, load_settings
from tests.support import services
from tests.support.services import free_port  # noqa: F401 - tests import it from here

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    """A superuser URL to a running PostgreSQL server."""
    if os.environ.get("BENCHSMITH_TEST_PG_URL"):
        yield os.environ["BENCHSMITH_TEST_PG_URL"]
        return
    try:
        with services.postgres_server() as url:
            yield url
    except services.ServiceError as exc:
        pytest.fail(str(exc))


def fresh_database(postgres_admin_url: str):
    """A new, empty database on the test server, dropped when the generator ends: yields its URL."""
    with services.fresh_database(postgres_admin_url) as url:
        yield url


@pytest.fixture
def postgres_url(postgres_admin_url) -> str:
    """A fresh, empty database for one test."""
    yield from fresh_database(postgres_admin_url)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """Run a test once on a SQLite file and once on a real PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def store(store_url):
    from benchsmith.store import Store

    with Store(store_url) as opened:
        yield opened
        assert_sound(opened)


def assert_sound(store) -> None:
    """What must hold in every store a test leaves: no item with a failed quality-gate verdict is live."""
    assert store.gate_contradictions() == [], "items with a failed quality-gate verdict are not dropped"


def assert_sound_at(db_url: str) -> None:
    """`assert_sound` on the SQLite store a test's commands wrote at `db_url`, read as it is (no migration);
    a test that left no store there, or a damaged or foreign file on purpose, has nothing to check."""
    import sqlalchemy as sa

    from benchsmith.store.lifecycle import gate_contradictions

    path = Path(db_url.removeprefix("sqlite:///"))
    if not db_url.startswith("sqlite:///") or not path.is_file():
        return
    engine = sa.create_engine(db_url)
    try:
        if not {"questions", "conversations", "verdicts"} <= set(sa.inspect(engine).get_table_names()):
            return
        with engine.connect() as conn:
            assert gate_contradictions(conn) == [], "items with a failed quality-gate verdict are not dropped"
    except sa.exc.DatabaseError:
        return
    finally:
        engine.dispose()


@pytest.fixture
def sqlite_store(tmp_path):
    """A SQLite store alone, for tests whose calls to a real model are too slow to make once per backend."""
    from benchsmith.store import Store

    with Store(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        yield opened


@pytest.fixture
def settings(tmp_path, monkeypatch):
    """Settings for a workspace in tmp_path, isolated from the caller's environment and files."""
    monkeypatch.chdir(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHSMITH") and k not in (
        "OPENAI_API_KEY", "OPENAI_BASE_URL", "LABEL_STUDIO_URL", "LABEL_STUDIO_API_KEY", "HF_TOKEN")}
    env["BENCHSMITH_WORKSPACE"] = str(tmp_path / "bench")
    loaded = load_settings(env=env)
    yield loaded
    assert_sound_at(loaded.db_url)


@pytest.fixture(scope="session")
def local_llm(tmp_path_factory):
    """The real local chat model (SmolLM2-135M via llama.cpp), served once per session."""
    from tests.support.local_llm import local_llm_server

    with local_llm_server(tmp_path_factory.mktemp("local-llm")) as server:
        yield server


@pytest.fixture(scope="session")
def oracle_dir(tmp_path_factory) -> Path:
    """40 oracle scenes (seed 7) with their truth manifest, rendered once per session."""
    from ingest.scenes import make_scenes

    out = tmp_path_factory.mktemp("oracle")
    make_scenes(out, 40, seed=7)
    return out


def wait_for_port(port: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


# --- Prefect -----------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """PREFECT_API_URL of a running server; the variable is set for the whole session."""
    if os.environ.get("PREFECT_API_URL"):
        yield os.environ["PREFECT_API_URL"]
        return
    home = tmp_path_factory.mktemp("prefect-home")
    previous = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "PREFECT_HOME")}
    try:
        with services.prefect_server(home) as url:
            os.environ.update(PREFECT_API_URL=url, PREFECT_HOME=str(home))
            yield url
    except services.ServiceError as exc:
        pytest.fail(str(exc))
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# --- Label Studio ------------------------------------------------------------------------------------

ADMIN = "admin@benchsmith.test"
ADMIN_PASSWORD = "admin-pass-123"
ADMIN_TOKEN = "admin-token-" + uuid.uuid4().hex[:12]


@dataclass
class LabelStudioServer:
    url: str
    root: Path  # the folder the server serves local files from; every test workspace lives inside it
    env: dict[str, str]
    process: subprocess.Popen | None = None

    def settings(self, **review: object) -> Settings:
        """Settings for a fresh workspace and project on this server; `review` overrides the section."""
        name = uuid.uuid4().hex[:8]
        env = dict(self.env, BENCHSMITH_WORKSPACE=str(self.root / f"ws-{name}"),
                   BENCHSMITH__REVIEW__PROJECT=f"test {name}")
        for key, value in review.items():
            env[f"BENCHSMITH__REVIEW__{key.upper()}"] = str(value).lower() if isinstance(value, bool) else str(value)
        return load_settings(env=env)

    def start(self) -> None:
        settings = load_settings(env=self.env)
        self.process = start(settings, settings.section("review", ReviewSettings), env=self.env)

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def add_user(self, email: str, password: str, token: str) -> None:
        """An annotator with their own login and API token, made by Label Studio's own `init` command."""
        review = load_settings(env=self.env).section("review", ReviewSettings)
        subprocess.run([str(executable(review)), "init", "--username", email, "--password", password,
                        "--user-token", token, "--data-dir", str(self.root / "server" / "labelstudio")],
                       env=self.env | {"LABEL_STUDIO_BASE_DATA_DIR": str(self.root / "server" / "labelstudio")},
                       check=True, capture_output=True, cwd=self.root)


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory) -> LabelStudioServer:
    root = tmp_path_factory.mktemp("labelstudio")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "LABEL_STUDIO"))}
    env |= {
        "BENCHSMITH_WORKSPACE": str(root / "server"),
        "LABEL_STUDIO_URL": f"http://127.0.0.1:{free_port()}",
        "LABEL_STUDIO_API_KEY": ADMIN_TOKEN,
        "LABEL_STUDIO_USERNAME": ADMIN,
        "LABEL_STUDIO_PASSWORD": ADMIN_PASSWORD,
        "BENCHSMITH__REVIEW__LOCAL_FILES_ROOT": str(root),
    }
    install(load_settings(env=env).section("review", ReviewSettings))
    server = LabelStudioServer(env["LABEL_STUDIO_URL"], root, env)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def annotators(label_studio) -> dict[str, str]:
    """Two annotators besides the admin: email -> API token."""
    users = {f"ann{i}@benchsmith.test": f"ann{i}-token-{uuid.uuid4().hex[:10]}" for i in (1, 2)}
    for email, token in users.items():
        label_studio.add_user(email, "annotator-pass-1", token)
    return users


def pytest_collection_modifyitems(config, items):
    """The longest files run first (order within a file kept): under `--dist loadfile` a worker takes whole
    files in collection order, and a long file started last would keep one worker busy alone. A file's
    length is the sum of its tests' `slow(seconds=...)` estimates (a bare `slow` counts 30 s)."""
    seconds: dict = {}
    for item in items:
        if marker := item.get_closest_marker("slow"):
            seconds[item.path] = seconds.get(item.path, 0) + marker.kwargs.get("seconds", 30)
    items.sort(key=lambda item: -seconds.get(item.path, 0))
