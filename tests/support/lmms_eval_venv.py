"""lmms-eval in its own virtual environment, for the test that runs a release's task through it.

lmms-eval requires torchvision, and PyPI's torchvision wheels are CUDA builds that fail at import
beside the CPU torch this project pins. So the venv gets lmms-eval without dependencies, then its
requirements minus torchvision and timm (which needs torchvision), with constraints.txt's CPU torch.
lmms-eval imports neither on the path a task YAML and a plugin model take. About 2 minutes and 2.4 GB.

`python -m tests.support.lmms_eval_venv` creates it (`make test-deps` does); a finished install leaves
a marker file, so running it again is instant.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

VERSION = "0.7.3"
LEFT_OUT = ("torchvision", "timm")
ROOT = Path(__file__).resolve().parents[2]


def venv_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    data_home = Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share").expanduser()
    return data_home / "benchsmith" / "lmms-eval-venv"


def executable(env: Mapping[str, str] | None = None) -> Path:
    return venv_path(env) / "bin" / "lmms-eval"


def installed(env: Mapping[str, str] | None = None) -> bool:
    return (venv_path(env) / f".lmms-eval-{VERSION}").is_file() and executable(env).is_file()


def _run(step: list[str]) -> str:
    done = subprocess.run(step, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise RuntimeError(f"installing lmms-eval failed at `{' '.join(step)}`:\n{tail}")
    return done.stdout


def install(python: str = sys.executable) -> Path:
    """Create the venv unless it already holds this version; return its lmms-eval command."""
    venv = venv_path()
    if installed():
        return executable()
    venv.parent.mkdir(parents=True, exist_ok=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-c", str(ROOT / "constraints.txt")]
    _run([python, "-m", "venv", "--clear", str(venv)])
    _run([*pip, "--no-deps", f"lmms-eval=={VERSION}"])
    listing = ("import importlib.metadata as m; print('\\n'.join(r for r in m.requires('lmms-eval') "
               "if 'extra ==' not in r))")
    requirements = [line for line in _run([str(venv / "bin" / "python"), "-c", listing]).splitlines()
                    if line and re.split(r"[\s<>=!~;\[(]", line)[0].lower() not in LEFT_OUT]
    _run([*pip, *requirements])
    (venv / f".lmms-eval-{VERSION}").touch()
    return executable()


if __name__ == "__main__":
    started = time.monotonic()
    print(f"lmms-eval {VERSION} in {install().parent.parent} ({time.monotonic() - started:.0f} s)")
