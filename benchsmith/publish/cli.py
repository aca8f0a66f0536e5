"""Commands of this stage, added to the `benchsmith` CLI by `register`."""

from __future__ import annotations

import typer


def register(app: typer.Typer, context) -> None:
    """Add this stage's commands to `app`; `context(ctx)` gives the settings and the store."""
