"""Every `--help` reads as its source says: no placeholder or code span is eaten by markup."""

from __future__ import annotations

import inspect
import re

import typer
from typer.testing import CliRunner

from flows.app import app

BOX = re.compile(r"[│╭╮╰╯─]")


def flat(text: str) -> str:
    """Help text without the panels' borders and the line wrapping."""
    return " ".join(BOX.sub(" ", text).split())


def commands(group, path: tuple[str, ...] = ()):
    yield path, group
    if hasattr(group, "list_commands"):  # a group (typer carries its own copy of click)
        ctx = typer.Context(group, info_name=path[-1] if path else "benchsmith")
        for name in group.list_commands(ctx):
            yield from commands(group.get_command(ctx, name), (*path, name))


def written(command) -> list[str]:
    """The help texts as the source writes them, paragraph by paragraph."""
    texts = [inspect.cleandoc(command.help or "")]
    texts += [param.help for param in command.params if getattr(param, "help", None)]
    return [" ".join(p.split()) for text in texts for p in text.split("\n\n") if p.strip()]


def test_every_help_text_reads_as_written():
    root = typer.main.get_command(app)
    tree = list(commands(root))
    assert ("labelstudio", "up") in dict(tree) and ("report",) in dict(tree)
    runner = CliRunner()
    placeholders = 0
    for path, command in tree:
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
        assert shown.exit_code == 0, (path, shown.output)
        output = flat(shown.output)
        for paragraph in written(command):
            placeholders += len(re.findall(r"<\w+>", paragraph))
            assert paragraph in output, f"`benchsmith {' '.join(path)} --help` does not show: {paragraph}"
    assert placeholders >= 2  # `<workspace>` in `labelstudio up` and `report --out`
