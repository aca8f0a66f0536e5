"""lmms-eval in its own virtual environment, for the tests that run a release's task through it.

Installed from locks/lmms-eval.txt, which leaves out torchvision and timm (PyPI's torchvision wheels are
CUDA builds that fail at import beside the CPU torch; lmms-eval imports neither on the path a task YAML
and a plugin model take) and holds filelock below 4 (lmms-eval 0.7.3 imports `filelock._api`, which
filelock 4 removed). About 2 minutes and 2.4 GB.

`python -m tests.support.lmms_eval_venv` creates it (`make test-deps` does); a finished install leaves a
marker file naming the lock's inputs, so running it again is instant until the lock changes.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from benchsmith.paths import LOCKS_DIR
from benchsmith.venvs import install_locked, lock_stamp, locked_versions

LOCK = LOCKS_DIR / "lmms-eval.txt"
VERSION = locked_versions(LOCK)["lmms-eval"]


def venv_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    data_home = Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share").expanduser()
    return data_home / "benchsmith" / "lmms-eval-venv"


def executable(env: Mapping[str, str] | None = None) -> Path:
    return venv_path(env) / "bin" / "lmms-eval"


def _marker(env: Mapping[str, str] | None = None) -> Path:
    return venv_path(env) / f".lmms-eval-{VERSION}-{lock_stamp(LOCK)}"


def installed(env: Mapping[str, str] | None = None) -> bool:
    return _marker(env).is_file() and executable(env).is_file()


def install(python: str = sys.executable) -> Path:
    """Create the venv unless it already holds this lock; return its lmms-eval command."""
    if not installed():
        install_locked(venv_path(), LOCK, python, what=f"lmms-eval {VERSION}")
        _marker().touch()
    return executable()


if __name__ == "__main__":
    started = time.monotonic()
    print(f"lmms-eval {VERSION} in {install().parent.parent} ({time.monotonic() - started:.0f} s)")
