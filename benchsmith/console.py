"""Terminal output shared by the CLI commands: one console, progress bars, tables."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

console = Console(stderr=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True, soft_wrap=True)


def _progress() -> Progress:
    """Bars on stderr with counts, time taken and time left; nothing when stderr is not a terminal."""
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn())
    return Progress(*columns, console=errors, transient=False, disable=not errors.is_terminal)


def _bar(progress: Progress, description: str, total: int | None) -> Callable[[int], None]:
    """A new bar; returns advance(n)."""
    task = progress.add_task(description, total=total)
    return lambda n=1: progress.advance(task, n)


@contextmanager
def progress_bar(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """One bar for work that is not a runner stage; yields advance(n)."""
    with _progress() as progress:
        yield _bar(progress, description, total)


@contextmanager
def stage_progress() -> Iterator[None]:
    """A bar for every runner stage run inside, however deep (the stages of a Prefect flow), named by the
    stage's label and counting its pending units."""
    from benchsmith import runner

    with _progress() as progress:
        runner.progress_for = partial(_bar, progress)
        try:
            yield
        finally:
            runner.progress_for = None


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    out = Table(title=title, title_justify="left", header_style="bold")
    for header in headers:
        out.add_column(Text(header), justify="right" if header in ("n", "count") else "left")
    for row in rows:
        out.add_row(*(Text(str(v)) for v in row))  # cell text is data, never markup
    return out
