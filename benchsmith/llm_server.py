"""A local chat model behind llama.cpp's OpenAI-compatible server, started and stopped by benchsmith.

`benchsmith llm serve` runs llama.cpp's server (the `xllamacpp` wheel, in this process) on loopback from
a GGUF file that a registry package installed (`data/local_models.yaml` names them), and every stage
that talks to an LLM reaches it through `benchsmith.llm.LlmClient` as it would any OpenAI-compatible
endpoint: point `services.openai_base_url` at `url()`. JSON-schema output (`response_format`) is
llama.cpp's own: it turns the schema into a grammar, so a reply always parses.

`--detach` starts the same server as a child process in a session of its own and returns once it
answers /health; its pid and address go in `<workspace>/llm_server.json`, which `benchsmith llm stop`
reads. Nothing is downloaded: a missing model says which package brings it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from benchsmith.errors import BenchsmithError
from benchsmith.paths import DATA_DIR
from benchsmith.settings import Settings, Strict, parse_yaml

MODELS_FILE = DATA_DIR / "local_models.yaml"
STATE_FILE = "llm_server.json"
LOG_FILE = "llm_server.log"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class LlmServerError(BenchsmithError, RuntimeError):
    """The local model server cannot start or stop; the message says why and what to do."""


class LlmServerSettings(Strict):
    """The `llm_server` section: which model `benchsmith llm serve` runs, and how."""

    model: str = "smollm2"          # a name in data/local_models.yaml, or the path of a GGUF file
    host: str = "127.0.0.1"         # loopback only: the server has no API key
    port: int = Field(8765, ge=1, le=65535)
    threads: int = Field(1, ge=1)   # llama.cpp threads; on 2 shared cores 2 threads ran 6-10x slower than 1
    context: int = Field(4096, ge=256)  # tokens per request slot (prompt and reply)
    parallel: int = Field(1, ge=1)  # requests decoded together
    start_timeout_s: float = Field(300, gt=0)  # load and readiness wait of a detached server
    models_dir: Path | None = None  # where models in parts are joined; None: <workspace>/cache/models
    autostart: bool = False         # `build` starts it (and stops it after) when services.openai_base_url is url()

    @field_validator("host")
    @classmethod
    def _loopback(cls, host: str) -> str:
        if host not in LOOPBACK:
            raise ValueError(f"{host!r} is not a loopback address; the local model server listens on "
                             f"{', '.join(LOOPBACK)} only")
        return host


def server_settings(settings: Settings) -> LlmServerSettings:
    return settings.section("llm_server", LlmServerSettings)


def models_dir(settings: Settings) -> Path:
    return server_settings(settings).models_dir or settings.cache_dir / "models"


def url(options: LlmServerSettings) -> str:
    """The base URL the OpenAI client takes (services.openai_base_url)."""
    return f"http://{options.host}:{options.port}/v1"


def known_models() -> dict[str, dict[str, Any]]:
    return parse_yaml(MODELS_FILE.read_text(encoding="utf-8"))


def _installed_file(package: str, inside: str, install: str) -> Path:
    try:
        path = Path(importlib.metadata.distribution(package).locate_file(inside))
    except importlib.metadata.PackageNotFoundError:
        raise LlmServerError(f"the model package {package} is not installed; install it with: {install}") from None
    if not path.is_file():
        raise LlmServerError(f"{package} is installed but has no {inside}; reinstall it: {install}")
    return path


def model_path(model: str, models_dir: Path) -> Path:
    """The GGUF file of `model` (a name in data/local_models.yaml, or a path); a model in parts is
    joined into `models_dir` the first time and its size and sha256 checked."""
    models = known_models()
    if model not in models:
        path = Path(model).expanduser()
        if not path.is_file():
            raise LlmServerError(f"no model {model!r}: name one of {', '.join(models)} or the path of a GGUF file")
        return path
    entry = models[model]
    if "parts" not in entry:
        return _installed_file(entry["package"], entry["file"], entry["install"])
    target = models_dir / f"{model}.gguf"
    if target.is_file() and target.stat().st_size == entry["bytes"]:
        return target
    parts = entry["parts"]
    sources = [_installed_file(parts["package"].format(n=n), parts["file"].format(n=n), entry["install"])
               for n in range(1, parts["count"] + 1)]
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_suffix(f".part-{os.getpid()}")
    digest, size = hashlib.sha256(), 0
    try:
        with scratch.open("wb") as out:
            for source in sources:
                with source.open("rb") as part:
                    while chunk := part.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
                        size += len(chunk)
        if size != entry["bytes"] or (entry.get("sha256") and digest.hexdigest() != entry["sha256"]):
            raise LlmServerError(f"the parts of {model} join into {size} bytes with sha256 {digest.hexdigest()}, "
                                 f"not the {entry['bytes']} bytes and sha256 {entry.get('sha256')} expected: "
                                 f"reinstall them: {entry['install']}")
        scratch.replace(target)
    finally:
        scratch.unlink(missing_ok=True)
    return target


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        # as the server binds: a port whose last connections linger in TIME_WAIT is free to it
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def require_free_port(options: LlmServerSettings) -> None:
    if not port_free(options.host, options.port):
        raise LlmServerError(f"port {options.port} on {options.host} is taken (a server already running? "
                             "`benchsmith llm stop`, or choose another llm_server.port)")


def healthy(options: LlmServerSettings, timeout_s: float = 2.0) -> bool:
    """Whether a server answers /health with ok (loaded and ready) at the configured address."""
    try:
        with urllib.request.urlopen(f"http://{options.host}:{options.port}/health", timeout=timeout_s) as reply:
            return json.loads(reply.read()).get("status") == "ok"
    except (OSError, ValueError, urllib.error.URLError):
        return False


def _params(path: Path, options: LlmServerSettings):
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.hostnames = [options.host]
    params.port = options.port
    params.cpuparams.n_threads = options.threads
    params.cpuparams_batch.n_threads = options.threads
    params.n_parallel = options.parallel
    params.n_ctx = options.context * options.parallel
    return params


def serve(settings: Settings, until: threading.Event | None = None) -> None:
    """Run the server in this process until SIGTERM/SIGINT (or `until` is set), with its state file written."""
    options = server_settings(settings)
    path = model_path(options.model, models_dir(settings))
    require_free_port(options)
    try:
        import xllamacpp
    except ImportError:
        raise LlmServerError("xllamacpp is not installed: pip install 'benchsmith[local-llm]'") from None
    until = until or threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: until.set())
    server = xllamacpp.Server(_params(path, options))
    state = settings.workspace / STATE_FILE
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"pid": os.getpid(), "url": url(options), "model": options.model,
                                 "path": str(path)}), encoding="utf-8")
    try:
        until.wait()
    finally:
        state.unlink(missing_ok=True)
        del server  # llama.cpp's server stops its loop and frees the model


def start_detached(settings: Settings, settings_file: Path | None = None) -> dict[str, Any]:
    """Start the server as a child process of its own session; return its state once it is ready. A
    child that dies while loading is reported with the end of its log."""
    options = server_settings(settings)
    model_path(options.model, models_dir(settings))  # a missing model fails here, not in the child's log
    require_free_port(options)
    settings.workspace.mkdir(parents=True, exist_ok=True)
    log = settings.workspace / LOG_FILE
    # the child reads the options resolved here (command line included), as one value
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHSMITH__LLM_SERVER")}
    env |= {"BENCHSMITH_WORKSPACE": str(settings.workspace), "BENCHSMITH_PROFILE": settings.profile,
            "BENCHSMITH__LLM_SERVER": json.dumps(options.model_dump(mode="json"))}
    if settings_file is not None:
        env["BENCHSMITH_SETTINGS"] = str(settings_file)
    with log.open("ab") as out:
        child = subprocess.Popen([sys.executable, "-m", "benchsmith.llm_server"], stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + options.start_timeout_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
            raise LlmServerError(f"the model server exited with status {child.returncode} while starting; "
                                 f"the end of {log}:\n" + "\n".join(tail))
        if healthy(options, timeout_s=1.0) and (settings.workspace / STATE_FILE).exists():
            return running(settings) or {}
        time.sleep(0.2)
    child.terminate()
    child.wait(10)
    raise LlmServerError(f"the model server was not ready within llm_server.start_timeout_s "
                         f"({options.start_timeout_s:g} s); see {log}")


@contextmanager
def serving(settings: Settings, say: Callable[[str], None] = print) -> Iterator[None]:
    """With `autostart`, a server for the run when the LLM endpoint is this server's address and none
    answers there yet; it is stopped when the run ends, and one that was already running is left alone."""
    options = server_settings(settings)
    wanted = options.autostart and settings.services.openai_base_url.rstrip("/") == url(options)
    if not wanted or healthy(options):
        yield
        return
    say(f"llm server: starting {options.model} at {url(options)} ({options.threads} thread(s))")
    info = start_detached(settings)
    try:
        yield
    finally:
        stop(settings)
        say(f"llm server: stopped (pid {info.get('pid')})")


def running(settings: Settings) -> dict[str, Any] | None:
    """The state of this workspace's server (pid, url, model), or None when none runs."""
    state = settings.workspace / STATE_FILE
    try:
        info = json.loads(state.read_text(encoding="utf-8"))
        os.kill(int(info["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info


def stop(settings: Settings, timeout_s: float = 30) -> dict[str, Any] | None:
    """Stop this workspace's server; the state of the one stopped, or None when none ran."""
    info = running(settings)
    state = settings.workspace / STATE_FILE
    if info is None:
        state.unlink(missing_ok=True)  # left by a server that was killed
        return None
    pid = int(info["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        _reap(pid)
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        _reap(pid)
    state.unlink(missing_ok=True)
    return info


def _reap(pid: int) -> None:
    """Collect a child of this process that has ended (a detached server started here), else nothing."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def main() -> None:
    """The detached server's process: settings from the environment its parent set."""
    from benchsmith.settings import load_settings

    settings = load_settings(os.environ.get("BENCHSMITH_SETTINGS") or None)
    try:
        serve(settings)
    except BenchsmithError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
