"""The lock files: they agree with what they were resolved from, they satisfy every requirement they stand
for, and every venv the project creates holds exactly its lock."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from annotation.server import venv_path as labelstudio_venv
from annotation.settings import ReviewSettings
from benchsmith.paths import LOCKS_DIR, REPO_ROOT
from benchsmith.venvs import installed_versions, locked_versions, normalize
from tests.support import lmms_eval_venv

sys.path.insert(0, str(LOCKS_DIR))
import lock as lock_tool  # noqa: E402 - locks/lock.py, a script beside the locks

# The platform the locks are resolved for, as PEP 508 markers see it.
MARKERS = {"python_version": lock_tool.PYTHON_VERSION, "python_full_version": f"{lock_tool.PYTHON_VERSION}.0",
           "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
           "os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "locks" / "lock.py"), "--check"], capture_output=True, text=True)


def requirements(path: Path) -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def project_requirements(extras: list[str]) -> list[Requirement]:
    """pyproject.toml's dependencies and the named extras, with benchsmith[...] extras followed."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    found = [Requirement(text) for text in project["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in project["optional-dependencies"][extra]:
            requirement = Requirement(text)
            if requirement.name == "benchsmith":
                todo += requirement.extras
            else:
                found.append(requirement)
    return found


def unmet(requirements_: list[Requirement], locked: dict[str, str]) -> list[str]:
    return [f"{r} (locked: {locked.get(normalize(r.name))})" for r in requirements_
            if (r.marker is None or r.marker.evaluate(MARKERS))
            and not r.specifier.contains(locked.get(normalize(r.name), "absent"), prereleases=True)]


def test_every_lock_matches_the_inputs_it_was_resolved_from():
    done = check(REPO_ROOT)
    assert done.returncode == 0, done.stderr


def test_a_dependency_changed_without_make_lock_fails_the_check_naming_the_locks(tmp_path):
    shutil.copytree(LOCKS_DIR, tmp_path / "locks")
    shutil.copy(REPO_ROOT / "constraints.txt", tmp_path)
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert '"inflect>=7",' in pyproject
    (tmp_path / "pyproject.toml").write_text(pyproject.replace('"inflect>=7",', '"inflect>=7",\n    "rich-click>=1",'))
    done = check(tmp_path)
    assert done.returncode == 1
    assert "install, install-dev, gpu-cuda" in done.stderr and "make lock" in done.stderr
    assert "labelstudio" not in done.stderr  # its own venv does not install benchsmith's dependencies


def test_a_changed_constraint_or_lock_input_is_caught_too(tmp_path):
    shutil.copytree(LOCKS_DIR, tmp_path / "locks")
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "constraints.txt").write_text((REPO_ROOT / "constraints.txt").read_text() + "rich<14\n")
    assert check(tmp_path).returncode == 1
    shutil.copy(REPO_ROOT / "constraints.txt", tmp_path)
    assert check(tmp_path).returncode == 0
    (tmp_path / "locks" / "lmms-eval.in").write_text("lmms-eval==0.7.3\nfilelock\npip\nsetuptools\n")
    done = check(tmp_path)
    assert done.returncode == 1 and "lmms-eval" in done.stderr


@pytest.mark.parametrize("name", [name for name, target in lock_tool.TARGETS.items() if "extras" in target])
def test_each_main_lock_satisfies_pyproject_and_the_constraints(name):
    locked = locked_versions(lock_tool.lock_path(name))
    wanted = project_requirements(lock_tool.TARGETS[name]["extras"]) + requirements(LOCKS_DIR / "tools.in")
    assert unmet(wanted, locked) == []
    constrained = [r for r in requirements(REPO_ROOT / "constraints.txt") if normalize(r.name) in locked]
    assert unmet(constrained, locked) == []
    assert "torch" in locked and "numpy" in locked


def test_cpu_locks_take_the_cpu_torch_and_the_cuda_lock_pypis():
    assert locked_versions(lock_tool.lock_path("install-dev"))["torch"].endswith("+cpu")
    cuda = locked_versions(lock_tool.lock_path("gpu-cuda"))
    assert "+" not in cuda["torch"] and "torchvision" in cuda
    assert any(name.startswith("nvidia-") for name in cuda)


def test_the_lmms_eval_lock_holds_filelock_3_and_leaves_out_torchvision_and_timm():
    locked = locked_versions(lock_tool.lock_path("lmms-eval"))
    assert locked["lmms-eval"] == "0.7.3"
    assert int(locked["filelock"].split(".")[0]) < 4
    assert "torchvision" not in locked and "timm" not in locked
    assert unmet(requirements(LOCKS_DIR / "lmms-eval.in"), locked) == []


def test_the_labelstudio_lock_is_the_version_review_settings_name():
    locked = locked_versions(lock_tool.lock_path("labelstudio"))
    assert locked["label-studio"] == ReviewSettings().server.version


def differences(python: Path, lock: Path, *, own: set[str] = frozenset()) -> dict[str, tuple]:
    """{package: (installed, locked)} wherever the environment and the lock disagree."""
    installed = {name: version for name, version in installed_versions(python).items() if name not in own}
    locked = locked_versions(lock)
    return {name: (installed.get(name), locked.get(name)) for name in installed.keys() | locked.keys()
            if installed.get(name) != locked.get(name)}


def test_the_test_venv_holds_exactly_the_install_dev_lock():
    assert Path(sys.prefix).resolve() == (REPO_ROOT / ".venv").resolve(), \
        f"the tests run in {sys.prefix}, not the locked .venv that `make install-dev` syncs"
    assert differences(Path(sys.executable), lock_tool.lock_path("install-dev"), own={"benchsmith"}) == {}


def test_label_studios_venv_holds_exactly_its_lock():
    python = labelstudio_venv(ReviewSettings()) / "bin" / "python"
    assert python.exists(), "Label Studio's venv is missing; `make test-deps` runs `benchsmith labelstudio install`"
    assert differences(python, lock_tool.lock_path("labelstudio")) == {}


def test_lmms_evals_venv_holds_exactly_its_lock():
    python = lmms_eval_venv.venv_path() / "bin" / "python"
    assert python.exists(), "lmms-eval's venv is missing; `make test-deps` runs `python -m tests.support.lmms_eval_venv`"
    assert differences(python, lock_tool.lock_path("lmms-eval")) == {}


@pytest.mark.slow
def test_make_install_gives_exactly_the_install_lock_and_a_working_command(tmp_path):
    """The demo's venv (`make install`) holds its lock and nothing else, and benchsmith runs from it."""
    venv = tmp_path / "venv"
    done = subprocess.run(["make", "-C", str(REPO_ROOT), "install", f"VENV={venv}", f"PYTHON={sys.base_prefix}/bin/python3"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert differences(venv / "bin" / "python", lock_tool.lock_path("install"), own={"benchsmith"}) == {}
    made = subprocess.run([str(venv / "bin" / "benchsmith"), "scenes", "make", "--n", "2", "--out", "scenes"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "scenes" / "manifest.jsonl").is_file()
