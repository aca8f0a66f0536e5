"""Virtual environments of their own (Label Studio's, the tests' lmms-eval) installed from a lock file in
locks/: every package at its locked version and hash, nothing resolved on the day of the install."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from benchsmith.errors import BenchsmithError

STAMP = "# inputs-sha256: "
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions(lock: Path) -> dict[str, str]:
    """{normalized name: version} of every package the lock pins."""
    return {normalize(m.group(1)): m.group(2) for line in lock.read_text().splitlines() if (m := PIN.match(line))}


def lock_stamp(lock: Path) -> str:
    """The hash of the inputs the lock was resolved from (its first line), short enough for a file name."""
    first = lock.read_text().split("\n", 1)[0]
    return first[len(STAMP):].strip()[:12] if first.startswith(STAMP) else "unstamped"


def installed_versions(python: Path) -> dict[str, str]:
    """{normalized name: version} of every distribution the interpreter's environment holds (isolated: a
    checkout in the working folder, with its egg-info, is not on the path)."""
    listing = ("import importlib.metadata as m\n"
               "for d in m.distributions(): print(d.metadata['Name'], d.version, sep='==')")
    done = subprocess.run([str(python), "-I", "-c", listing], capture_output=True, text=True, check=True)
    return {normalize(name): version for name, _, version in
            (line.partition("==") for line in done.stdout.splitlines() if "==" in line)}


def install_locked(venv: Path, lock: Path, python: str, *, what: str) -> None:
    """A fresh venv holding exactly the lock's packages (pip and setuptools are in the lock too)."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    steps = [[python, "-m", "venv", "--clear", str(venv)],
             [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              "--no-deps", "--require-hashes", "-r", str(lock)]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
            raise BenchsmithError(f"installing {what} into {venv} from {lock} failed at `{' '.join(step)}`:\n{tail}")
