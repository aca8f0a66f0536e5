"""The environment the benchmarks run the CLI in: a user's shell, not this checkout's session."""

from __future__ import annotations

import os


def user_env(*also_drop: str) -> dict[str, str]:
    """This process's environment without benchsmith's own settings (nor variables starting with any of
    `also_drop`), and with Python's bytecode cache on. Some machines, this sandbox among them, set
    PYTHONDONTWRITEBYTECODE, so every command would compile the whole package from source again, a few
    tenths of a second that no installed copy pays (pip writes the bytecode, and an editable install
    writes it on the first run)."""
    drop = ("BENCHSMITH", "PYTHONDONTWRITEBYTECODE", *also_drop)
    return {name: value for name, value in os.environ.items() if not name.startswith(drop)}
