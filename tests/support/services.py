"""Throwaway real services for tests and benchmarks: a PostgreSQL cluster and a Prefect server, each
started on a free loopback port and stopped (and deleted) when its context ends."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import httpx
import sqlalchemy as sa


class ServiceError(RuntimeError):
    """A service could not be started: the message says what is missing."""


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
        raise ServiceError(f"PostgreSQL's {name} not found: apt-get install postgresql, or set BENCHSMITH_TEST_PG_URL")
    return path


@contextmanager
def postgres_server():
    """A superuser URL to a new PostgreSQL cluster (Debian's binaries, run as the postgres user when root)."""
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


@contextmanager
def fresh_database(postgres_admin_url: str):
    """A new, empty database on the server, dropped when the context ends: yields its URL."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield str(sa.make_url(postgres_admin_url).set(database=name).render_as_string(hide_password=False))
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def prefect_server(home: Path, timeout_s: float = 120):
    """PREFECT_API_URL of a new Prefect server keeping its database under `home`."""
    port = free_port()
    env = dict(os.environ, PREFECT_HOME=str(home), DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_UI_ENABLED="false", PREFECT_LOGGING_LEVEL="WARNING")
    prefect = Path(sys.executable).with_name("prefect")
    server = subprocess.Popen([str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.time() + timeout_s
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
            if server.poll() is not None:
                raise ServiceError("prefect server exited during start-up")
            if time.time() > deadline:
                raise ServiceError(f"prefect server did not become healthy in {timeout_s:g} s")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
