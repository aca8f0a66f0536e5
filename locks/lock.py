"""Resolve, stamp and check the lock files of every environment benchsmith installs.

    python locks/lock.py            resolve every lock again with uv (what `make lock` runs)
    python locks/lock.py NAME ...   only these locks
    python locks/lock.py --check    fail, naming them, when locks were resolved from other inputs

Resolving again keeps an existing lock's pins where its new inputs allow them, so adding one package
moves nothing else; delete a lock file to resolve it to the newest versions.

Each lock starts with a stamp: a hash of exactly what it was resolved from (pyproject.toml's dependency
tables, constraints.txt, the lock's own inputs and the target platform). `--check` needs no network and no
uv: it recomputes the stamps, so a dependency changed in pyproject.toml without `make lock` fails the tests.

Locks are for one interpreter and platform (`PYTHON_VERSION`, `PLATFORM`), the ones `make` and CI use.
Resolving with uv: it resolves for a target platform without installing it, emits hashes, is one pinned
wheel from PyPI, and `uv pip sync` makes a venv hold exactly a lock (pip-tools needs the platform it locks).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

LOCKS = Path(__file__).resolve().parent
ROOT = LOCKS.parent
PYTHON_VERSION = "3.11"
PLATFORM = "x86_64-manylinux_2_28"
STAMP = "# inputs-sha256: "
# Where the CPU build of torch (a local version, 2.13.0+cpu) is found: this machine kind's wheel folder,
# else PyTorch's CPU index. The CUDA lock takes PyPI's torch, which is the CUDA build.
CPU_TORCH = (["--find-links", "/opt/wheels"] if Path("/opt/wheels").is_dir()
             else ["--extra-index-url", "https://download.pytorch.org/whl/cpu", "--index-strategy", "unsafe-best-match"])

# name -> what it is resolved from. `extras`: pyproject.toml's extras (the main venv, benchsmith itself
# installed on top with --no-deps); `inputs`: a requirements file of its own (a separate venv).
TARGETS: dict[str, dict] = {
    "install": {"extras": ["local", "review", "publish"], "cpu": True,           # make install / make demo
                "excludes": "local-llm.exclude"},
    "install-dev": {"extras": ["all", "distributed", "dev"], "cpu": True,        # make install-dev / make test
                    "excludes": "local-llm.exclude"},
    "gpu-cuda": {"extras": ["all", "sam", "distributed"], "cpu": False,          # CUDA machines (README)
                 "excludes": "local-llm.exclude"},
    "labelstudio": {"inputs": "labelstudio.in", "cpu": False},                   # benchsmith labelstudio install
    "lmms-eval": {"inputs": "lmms-eval.in", "excludes": "lmms-eval.exclude", "cpu": True},  # the tests' lmms-eval
    "uv": {"inputs": "uv.in", "cpu": False},                                     # bootstraps the main venv
}


def lock_path(name: str) -> Path:
    return LOCKS / f"{name}.txt"


def _requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return sorted(line for line in lines if line)


def inputs_digest(name: str) -> str:
    """A hash of everything that decides the lock's content, comments and formatting left out."""
    target = TARGETS[name]
    inputs: dict = {"target": target, "python": PYTHON_VERSION, "platform": PLATFORM,
                    "constraints": _requirement_lines(ROOT / "constraints.txt")}
    if "extras" in target:
        pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
        project = pyproject["project"]
        inputs |= {"requires-python": project.get("requires-python"),
                   "dependencies": sorted(project.get("dependencies", [])),
                   "optional-dependencies": {k: sorted(v) for k, v in project.get("optional-dependencies", {}).items()},
                   "build-requires": sorted(pyproject.get("build-system", {}).get("requires", [])),
                   "tools": _requirement_lines(LOCKS / "tools.in")}
    for key in ("inputs", "excludes"):
        if key in target:
            inputs[key] = _requirement_lines(LOCKS / target[key])
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def stamp_of(path: Path) -> str | None:
    if not path.exists():
        return None
    first = path.read_text().split("\n", 1)[0]
    return first[len(STAMP):].strip() if first.startswith(STAMP) else None


def stale() -> list[str]:
    return [name for name in TARGETS if stamp_of(lock_path(name)) != inputs_digest(name)]


def compile_command(name: str, output: Path) -> list[str]:
    target = TARGETS[name]
    command = [sys.executable, "-m", "uv", "pip", "compile", "--quiet", "--generate-hashes",
               "--python-version", PYTHON_VERSION, "--python-platform", PLATFORM,
               "--custom-compile-command", f"make lock LOCKS={name}", "-o", str(output)]
    if "extras" in target:
        command += ["pyproject.toml", str(LOCKS / "tools.in"), "-c", "constraints.txt"]
        command += [arg for extra in target["extras"] for arg in ("--extra", extra)]
    else:
        command += [str(LOCKS / target["inputs"]), "-c", "constraints.txt"]
    if "excludes" in target:
        command += ["--excludes", str(LOCKS / target["excludes"])]
    if target["cpu"]:
        command += CPU_TORCH
    return command


def resolve(name: str) -> None:
    path = lock_path(name)
    scratch = path.with_suffix(".tmp")
    if path.exists():  # uv keeps the pins of an existing output file: a changed input moves only what it must
        scratch.write_text(path.read_text())
    done = subprocess.run(compile_command(name, scratch), cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        scratch.unlink(missing_ok=True)
        sys.exit(f"resolving {name} failed:\n{done.stderr.strip()}")
    scratch.write_text(f"{STAMP}{inputs_digest(name)}\n{scratch.read_text()}")
    scratch.replace(path)
    print(f"{path.relative_to(ROOT)}: {sum(1 for line in path.read_text().splitlines() if '==' in line)} packages")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        names = stale()
        if names:
            print(f"locks out of date with their inputs: {', '.join(names)}; run `make lock` "
                  f"(or `make lock LOCKS=\"{' '.join(names)}\"`) and commit locks/", file=sys.stderr)
            return 1
        print(f"{len(TARGETS)} locks match their inputs")
        return 0
    unknown = [name for name in argv if name not in TARGETS]
    if unknown:
        print(f"unknown lock {', '.join(unknown)}; the locks are {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    for name in argv or TARGETS:
        resolve(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
