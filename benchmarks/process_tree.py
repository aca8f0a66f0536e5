"""Memory of a command and every process it starts, sampled from /proc while it runs.

A command that forks workers shares most of its pages with them, so the sum of their RSS counts those
pages once per process. PSS divides each shared page among the processes that map it: its sum is what
the whole tree takes from the machine. RssAnon is the memory a process holds itself (no file pages),
which for forked workers also counts the pages they share once per process.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

FIELDS = {"VmRSS:": "rss", "RssAnon:": "anon", "Pss:": "pss"}
PSS_EVERY = 1.0  # seconds: reading smaps_rollup walks the whole address space (~10 ms for 400 MB), status does not


def tree(pid: int) -> list[int]:
    """`pid` and its descendants now alive."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [pid] + [p for child in children for p in tree(int(child))]


def _kb(pid: int, path: str) -> dict[str, int]:
    try:
        lines = Path(f"/proc/{pid}/{path}").read_text().splitlines()
    except OSError:
        return {}
    return {FIELDS[name]: int(rest[0]) for name, *rest in map(str.split, lines) if name in FIELDS and rest}


def sample_mb(pids: list[int], *, pss: bool = False) -> dict[str, float]:
    """Summed RSS and RssAnon (/proc/PID/status) of `pids`, in MB, and with `pss` their summed PSS
    (smaps_rollup, costly to read: see PSS_EVERY)."""
    total = {"rss": 0, "anon": 0, "processes": 0} | ({"pss": 0} if pss else {})
    for pid in pids:
        status = _kb(pid, "status")
        if not status:
            continue
        total["rss"] += status.get("rss", 0)
        total["anon"] += status.get("anon", 0)
        total["processes"] += 1
        if pss:
            total["pss"] += _kb(pid, "smaps_rollup").get("pss", 0)
    return {k: (v / 1024 if k != "processes" else v) for k, v in total.items()}


def run_sampled(command: list[str], *, cwd: Path, env: dict, every: float = 0.05,
                timeout: float = 3600) -> tuple[float, dict[str, float], str, str, int]:
    """Run `command`; return its wall seconds, the peak of each summed figure over its process tree
    (`sample_mb`: RSS and RssAnon every `every` seconds, PSS every PSS_EVERY, plus the most processes
    seen at once), its stdout, stderr and exit code."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err, text=True)
        peaks = {"rss": 0.0, "pss": 0.0, "anon": 0.0, "processes": 0}
        last_pss = -PSS_EVERY
        while child.poll() is None:
            now = time.perf_counter()
            with_pss = now - last_pss >= PSS_EVERY
            last_pss = now if with_pss else last_pss
            for name, value in sample_mb(tree(child.pid), pss=with_pss).items():
                peaks[name] = max(peaks[name], value)
            if now - started > timeout:
                child.kill()
            time.sleep(every)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        return wall, {k: round(v, 1) for k, v in peaks.items()}, out.read(), err.read(), child.returncode
