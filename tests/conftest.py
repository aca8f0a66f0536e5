"""Shared fixtures: real services started for the test session, and small stores.

PostgreSQL: `.ci/run` starts a server and sets BENCHSMITH_TEST_PG_URL. Without it, the fixture starts
a throwaway cluster itself with Debian's PostgreSQL binaries, so the PostgreSQL tests never skip
silently: they run, or they fail saying what is missing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pg_bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if found:
        return str(found[-1])
    path = shutil.which(name)
    if not path:
        pytest.fail(f"PostgreSQL's {name} not found: apt-get install postgresql, or set BENCHSMITH_TEST_PG_URL")
    return path


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    """A superuser URL to a running PostgreSQL server."""
    if os.environ.get("BENCHSMITH_TEST_PG_URL"):
        yield os.environ["BENCHSMITH_TEST_PG_URL"]
        return
    data = Path(tempfile.mkdtemp(prefix="benchsmith-pg-"))  # outside pytest's root-only tmp tree
    data.chmod(0o755)
    run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if run_as:
        shutil.chown(data, "postgres")
    port = free_port()
    subprocess.run([*run_as, _pg_bin("initdb"), "-D", str(data / "db"), "-U", "postgres", "-A", "trust"],
                   check=True, capture_output=True)
    subprocess.run([*run_as, _pg_bin("pg_ctl"), "-D", str(data / "db"), "-l", str(data / "log"), "-w", "-o",
                    f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*run_as, _pg_bin("pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_admin_url) -> str:
    """A fresh, empty database for one test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    yield str(sa.make_url(postgres_admin_url).set(database=name).render_as_string(hide_password=False))
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


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


@pytest.fixture
def settings(tmp_path, monkeypatch):
    """Settings for a workspace in tmp_path, isolated from the caller's environment and files."""
    from benchsmith.settings import load_settings

    monkeypatch.chdir(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHSMITH") and k not in (
        "OPENAI_API_KEY", "OPENAI_BASE_URL", "LABEL_STUDIO_URL", "LABEL_STUDIO_API_KEY", "HF_TOKEN")}
    env["BENCHSMITH_WORKSPACE"] = str(tmp_path / "bench")
    return load_settings(env=env)


@pytest.fixture(scope="session")
def oracle_dir(tmp_path_factory) -> Path:
    """40 oracle scenes (seed 7) with their truth manifest, rendered once per session."""
    from benchsmith.scenes import make_scenes

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
