"""Fixtures for fault injection: small or read-only file systems, and the installed CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHSMITH = str(Path(sys.executable).with_name("benchsmith"))


def run_cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "PREFECT_API"))}
    return subprocess.run([BENCHSMITH, *args], cwd=cwd, env=clean | (env or {}), capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def mount_tmpfs(tmp_path):
    """mount_tmpfs(name, size='64k', read_only=False) -> a fresh tmpfs folder; resize with remount(path, size)."""
    mounted: list[Path] = []

    def mount(name: str, size: str = "64k", read_only: bool = False) -> Path:
        path = tmp_path / name
        path.mkdir()
        options = f"size={size}" + (",ro" if read_only else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
        if done.returncode:
            pytest.fail(f"these tests mount small tmpfs file systems and need root (CAP_SYS_ADMIN): {done.stderr}")
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)
