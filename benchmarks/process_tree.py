"""Memory of a command and every process it starts, sampled from /proc while it runs.

A command that forks workers shares most of its pages with them, so the sum of their RSS counts those
pages once per process. PSS divides each shared page among the processes that map it: its sum is what
the whole tree takes from the machine. RssAnon is the memory a process holds itself (no file pages).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

FIELDS = {"Rss:": "rss", "Pss:": "pss", "RssAnon:": "anon"}


def tree(pid: int) -> list[int]:
    """`pid` and its descendants now alive."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [pid] + [p for child in children for p in tree(int(child))]


def _kb(pid: int, path: str) -> dict[str, int]:
    found = {}
    try:
        lines = Path(f"/proc/{pid}/{path}").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        name, _, rest = line.partition(" ")
        if name in FIELDS:
            found[FIELDS[name]] = int(rest.split()[0])
    return found


def sample_mb(pids: list[int]) -> dict[str, float]:
    """Summed RSS, PSS (smaps_rollup) and RssAnon (status) of `pids`, in MB."""
    total = {"rss": 0, "pss": 0, "anon": 0, "processes": 0}
    for pid in pids:
        rollup, status = _kb(pid, "smaps_rollup"), _kb(pid, "status")
        if not rollup:
            continue
        total["rss"] += rollup.get("rss", 0)
        total["pss"] += rollup.get("pss", 0)
        total["anon"] += status.get("anon", 0)
        total["processes"] += 1
    return {k: (v / 1024 if k != "processes" else v) for k, v in total.items()}


def run_sampled(command: list[str], *, cwd: Path, env: dict, every: float = 0.05,
                timeout: float = 3600) -> tuple[float, dict[str, float], str, str, int]:
    """Run `command`; return its wall seconds, the peak of each summed figure over its process tree
    (`sample_mb`, plus the most processes seen at once), its stdout, stderr and exit code."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err, text=True)
        peaks = {"rss": 0.0, "pss": 0.0, "anon": 0.0, "processes": 0}
        while child.poll() is None:
            now = sample_mb(tree(child.pid))
            peaks = {k: max(v, now[k]) for k, v in peaks.items()}
            if time.perf_counter() - started > timeout:
                child.kill()
            time.sleep(every)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        return wall, {k: round(v, 1) for k, v in peaks.items()}, out.read(), err.read(), child.returncode
