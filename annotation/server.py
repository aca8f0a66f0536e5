"""A local Label Studio server in its own virtual environment (it pins older versions of packages
benchsmith uses), with its data under the workspace and its admin user and token from the environment."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

import httpx

from annotation.client import LabelStudioError
from annotation.push import local_files_root
from annotation.settings import ReviewSettings
from benchsmith.errors import BenchsmithError
from benchsmith.paths import LOCKS_DIR, REPO_ROOT
from benchsmith.settings import Settings
from benchsmith.venvs import install_locked, lock_stamp, locked_versions

LOCAL_HOSTS = {"127.0.0.1", "localhost"}
START_TIMEOUT_S = 240  # the first start migrates a fresh database: 30-40 s on two cores, more when busy


def default_venv(env: Mapping[str, str] | None = None) -> Path:
    """Outside any git checkout: Label Studio takes its version from the git repository around its own
    files when there is one, and would report that repository's last commit as its own."""
    env = os.environ if env is None else env
    data_home = Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share").expanduser()
    return data_home / "benchsmith" / "labelstudio-venv"


def venv_path(review: ReviewSettings) -> Path:
    """`review.server.venv` (relative to the benchsmith checkout unless absolute), or `default_venv()`."""
    if not review.server.venv:
        return default_venv().resolve()
    return (REPO_ROOT / Path(review.server.venv).expanduser()).resolve()


def executable(review: ReviewSettings) -> Path:
    return venv_path(review) / "bin" / "label-studio"


def install(review: ReviewSettings, python: str = sys.executable) -> Path:
    """Create the server's virtual environment from locks/labelstudio.txt unless it already holds that lock;
    return the command. A `review.server.version` other than the lock's is refused: `make lock` pins another."""
    lock = LOCKS_DIR / "labelstudio.txt"
    locked = locked_versions(lock).get("label-studio")
    if locked != review.server.version:
        raise LabelStudioError(f"review.server.version is {review.server.version}, but {lock} locks Label Studio "
                               f"{locked}; set the version to {locked}, or change locks/labelstudio.in and run "
                               "`make lock LOCKS=labelstudio`")
    venv = venv_path(review)
    marker = venv / f".label-studio-{review.server.version}-{lock_stamp(lock)}"
    if marker.exists() and executable(review).exists():
        return executable(review)
    try:
        install_locked(venv, lock, python, what=f"Label Studio {review.server.version}")
    except BenchsmithError as exc:
        raise LabelStudioError(str(exc)) from None
    marker.touch()
    return executable(review)


def data_dir(settings: Settings) -> Path:
    return settings.workspace / "labelstudio"


def server_environment(settings: Settings, review: ReviewSettings, env: dict[str, str] | None = None) -> dict[str, str]:
    """The variables the server starts with. The admin's password and token come from the caller's
    environment and are handed to the server process only, never written anywhere by us."""
    env = dict(os.environ if env is None else env)
    token = settings.secrets.label_studio_api_key
    password = env.get("LABEL_STUDIO_PASSWORD", "")
    if token is None or len(token.get_secret_value()) < 6:
        raise LabelStudioError("set LABEL_STUDIO_API_KEY to the admin's API token (6 characters or more) before "
                               "starting the server; clients use the same variable")
    if len(password) < 8:
        raise LabelStudioError("set LABEL_STUDIO_PASSWORD to the admin's password (8 characters or more)")
    return env | {
        "LABEL_STUDIO_USERNAME": env.get("LABEL_STUDIO_USERNAME") or review.server.username,
        "LABEL_STUDIO_PASSWORD": password,
        "LABEL_STUDIO_USER_TOKEN": token.get_secret_value(),
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir(settings)),
        "LOCAL_FILES_SERVING_ENABLED": "true",
        "LOCAL_FILES_DOCUMENT_ROOT": str(local_files_root(settings, review)),
        "SSRF_PROTECTION_ENABLED": "false",
        "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "",
        "LATEST_VERSION_CHECK": "false", "COLLECT_ANALYTICS": "false",
        # Label Studio asks git for its version from its own folder; a venv placed inside a checkout would
        # otherwise report (and write into its package) that checkout's last commit.
        "GIT_CEILING_DIRECTORIES": str(venv_path(review)),
    }


def host_port(settings: Settings) -> tuple[str, int]:
    url = urlparse(settings.services.label_studio_url)
    if url.hostname not in LOCAL_HOSTS:
        raise LabelStudioError(f"LABEL_STUDIO_URL is {settings.services.label_studio_url}; `labelstudio up` starts "
                               "a server on this machine only (127.0.0.1 or localhost)")
    return "127.0.0.1", url.port or 80


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url.rstrip('/')}/api/version", timeout=3).status_code == 200
    except httpx.HTTPError:
        return False


def running(settings: Settings) -> int | None:
    """The pid of the server started from this workspace (`up --detach`), if it is still alive."""
    pid_file = data_dir(settings) / "server.pid"
    try:
        pid = int(pid_file.read_text())
        os.killpg(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
        return None
    return pid


def port_holder(port: int) -> str:
    """What listens on a local TCP port, as "process PID (command)", from /proc; "" where that cannot be told
    (not Linux, or another user's process)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: listening
                inodes.add(f"socket:[{fields[9]}]")
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                command = (fd_dir.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                return f"process {fd_dir.parent.name} ({command.strip()[:200]})"
        except OSError:
            continue
    return ""


def start(settings: Settings, review: ReviewSettings, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start the server and wait until it answers. Label Studio takes another port without saying so
    when the one asked for is busy, and another server on our port would take our pushes and refuse our
    token, so a busy port is an error here, naming what holds it."""
    host, port = host_port(settings)
    url = settings.services.label_studio_url
    with socket.socket() as sock:
        if sock.connect_ex((host, port)) == 0:
            holder = port_holder(port)
            what = "a Label Studio not started from this workspace" if healthy(url) else "something else"
            raise LabelStudioError(f"port {port} is held by {holder or what}; stop it, or choose a free port in "
                                   f"LABEL_STUDIO_URL (workspace {settings.workspace})")
    command = executable(review)
    if not command.exists():
        raise LabelStudioError(f"Label Studio is not installed at {command.parent.parent}; run "
                               "`benchsmith labelstudio install` first")
    folder = data_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)  # its database holds the admin's token in plain text
    log = os.fdopen(os.open(folder / "server.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
    process = subprocess.Popen(
        [str(command), "start", "--no-browser", "--internal-host", host, "--port", str(port), "--data-dir",
         str(folder)], env=server_environment(settings, review, env), stdout=log, stderr=subprocess.STDOUT,
        cwd=folder, start_new_session=True, umask=0o077)
    log.close()
    deadline = time.time() + START_TIMEOUT_S
    while not healthy(url):
        if process.poll() is not None:
            raise LabelStudioError(f"Label Studio exited with code {process.returncode}; see {folder / 'server.log'}")
        if time.time() > deadline:
            stop(process)
            raise LabelStudioError(f"Label Studio did not answer at {url} within {START_TIMEOUT_S} s; "
                                   f"see {folder / 'server.log'}")
        time.sleep(0.5)
    (folder / "server.pid").write_text(str(process.pid))
    return process


def stop(process: subprocess.Popen | int, timeout: float = 20) -> None:
    """Stop a server started by `start` (a Popen, or the pid from the data folder)."""
    pid = process if isinstance(process, int) else process.pid
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        if isinstance(process, subprocess.Popen) and process.poll() is not None:
            return
        time.sleep(0.2)
    os.killpg(pid, signal.SIGKILL)


def annotator_guide(settings: Settings, review: ReviewSettings) -> str:
    url = settings.services.label_studio_url
    return f"""Label Studio is running at {url} (data in {data_dir(settings)}).

For annotators:
  1. Open the signup link the maintainer sends you and choose an email and a password (or log in at
     {url} with the account you were given).
  2. Open the project "{review.project}" (or "{review.project} (image sets)", whose questions are about
     several numbered images) and press "Label All Tasks".
  3. For each question: pick the correct option (keys 1-4); check the evaluation dimension and change it
     if it is wrong; choose Keep (k), or Discard (x) with the reasons; then Submit (Ctrl+Enter).
     Each question is shown to {review.overlap} annotator(s).

For maintainers: `benchsmith review annotators invite` prints the signup link to send to annotators,
`benchsmith review annotators list` shows who has annotated how much; `benchsmith review push` sends
questions, `benchsmith review pull` brings the decisions back, `benchsmith review status` shows progress
and agreement (`--flagged` lists ties waiting for a deciding annotation)."""
