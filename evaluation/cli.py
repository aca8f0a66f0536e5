"""`benchsmith eval`: score models on a release, print the leaderboard, analyse the items."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Optional

import typer

# The source options every `eval` command takes.
Release = Annotated[Optional[str], typer.Option(
    help="A published version (e.g. v1) or a release folder (default: the latest version published).")]
Hub = Annotated[Optional[str], typer.Option(
    help="A dataset on the Hugging Face Hub, org/name (its `all` or `conversations` config, `test` split).")]
Candidates = Annotated[bool, typer.Option(
    "--candidates", help="The store's questions (or conversations) not yet published (candidates, in review, accepted).")]


def _source(c, store, release, hub, candidates, kind="questions"):
    from publish.settings import releases_root
    from evaluation.sources import resolve

    return resolve(release=release, hub=hub, candidates=candidates, releases_root=releases_root(c.settings),
                   store=store, media_dir=c.settings.media_dir, kind=kind)


PROTOCOL_HELP = ("An installed protocol: single (SEED-Bench), circular (every rotation of the options must be right), "
                 "instability (several prompt wordings x option shuffles), conveval (the source's three-turn "
                 "conversations, held by a chat model and graded by a judge LLM), or a plugin's; default: "
                 "evaluate.protocol.")


def out_folder(settings, label: str) -> Path:
    """The folder (made here) where a source's boards and item analysis go."""
    from evaluation.settings import EvalSettings

    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")[:100] or "source"
    folder = settings.workspace / settings.section("evaluate", EvalSettings).out_dir / slug
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def register(app: typer.Typer, context) -> None:
    eval_app = typer.Typer(help="Score models on a release and find the questions the scores put in doubt.",
                           no_args_is_help=True)
    app.add_typer(eval_app, name="eval")

    @eval_app.command("run")
    def run_command(
        ctx: typer.Context,
        model: Annotated[list[str], typer.Option("--model", "-m", help="A model named under evaluate.models; "
                                                 "repeat for several.")],
        release: Release = None,
        hub: Hub = None,
        candidates: Candidates = False,
        protocol: Annotated[Optional[str], typer.Option(help=PROTOCOL_HELP)] = None,
        limit: Annotated[Optional[int], typer.Option(min=1, help="At most this many passes (or "
                                                     "conversation-settings) now.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
    ) -> None:
        """Score models on a source's questions (or conversations, under --protocol conveval).

        Each answer is stored as it arrives (the raw output too), so an interrupted run goes on where it
        stopped, and a rerun of a finished one loads no model and sends no request. Models are configured
        by name under `evaluate.models`: `likelihood` (a transformers VLM ranks the options),
        `generate` (the same kind of model answers in words), `openai` (a chat endpoint answers) - the
        replies of these two are matched to an option - or `blind` (a text-only baseline from the blind
        filter).

        Under --protocol conveval, each `openai` model answers the three turns of every conversation in
        sequence (its own earlier answers in context, the image in the first turn), also with the
        reference answers of turn 1, and of turns 1-2, given in place of its own (the ablation); a judge
        LLM grades each turn and the whole conversation from 1 to 10 and against an opponent (win, tie,
        lose), under several prompts pooled.
        """
        from benchsmith import runner
        from benchsmith.console import console, progress_bar
        from evaluation.contract import configured
        from evaluation.stage import evaluate

        c = context(ctx)
        shown = configured(c.settings, protocol)
        results = []
        with c.store() as store:
            source = _source(c, store, release, hub, candidates, shown.items)
            for name in model:
                stage = shown.stage(store, c.settings, source, name)
                pending = len(runner.pending(stage, store))
                with progress_bar(f"{name} on {source.label}", min(pending, limit) if limit else pending) as advance:
                    report = evaluate(store, stage, limit=limit, progress=advance)
                results.append({"model": name, "run": stage.run.id, **report.as_dict()})
                if not as_json:
                    counts = ", ".join(f"{n} {what}" for what, n in sorted(report.counters.items()))
                    console.print(f"[bold]{name}[/] on {source.label} ({shown.name}): {report.done} done of "
                                  f"{report.pending} pending, {report.failed} not scored, {report.retry_later} "
                                  f"left for the next run" + (f" ({counts})" if counts else ""))
                    for reason, n in report.failures.most_common(3):
                        console.print(f"  {n} x {reason}")
        if as_json:
            print(json.dumps(results, indent=2, default=str))

    @eval_app.command("board")
    def board_command(
        ctx: typer.Context,
        release: Release = None,
        hub: Hub = None,
        candidates: Candidates = False,
        protocol: Annotated[Optional[str], typer.Option(help=PROTOCOL_HELP)] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the board as JSON.")] = False,
    ) -> None:
        """Print and write the leaderboard of every model evaluated on a source under a protocol.

        For the question protocols (one board for all of them): accuracy per dimension and overall with
        95% bootstrap intervals, the format-hit rate (answers matched to an option), instability
        (instability protocol) and skipped passes; blind baselines are shown beside the models. Writes
        board.md, board.png and board.json under <workspace>/evaluations/<source>/. Under --protocol
        conveval: direct scores per turn and overall, and pairwise win and tie rates, per model and
        ablation setting, in conversations.md and .json.
        """
        from benchsmith.console import console
        from evaluation.contract import configured

        c = context(ctx)
        shown = configured(c.settings, protocol)
        with c.store(create=False) as store:
            source = _source(c, store, release, hub, candidates, shown.items)
            folder = out_folder(c.settings, source.label)
            markdown, data, runs = shown.board(store, c.settings, source, folder)
        if as_json:
            print(json.dumps(data, indent=2))
        elif not runs:
            console.print(f"no model has been evaluated on {source.label} under {shown.name} yet: run "
                          f"`benchsmith eval run --protocol {shown.name} --model NAME`")
        else:
            print(markdown)
            console.print(f"written to {folder}")

    @eval_app.command("items")
    def items_command(
        ctx: typer.Context,
        release: Release = None,
        hub: Hub = None,
        candidates: Candidates = False,
        show: Annotated[int, typer.Option(min=0, help="Flagged questions to print.")] = 20,
    ) -> None:
        """Item analysis over every model evaluated on a source.

        Per question: difficulty (mean score of the models), discrimination (point-biserial against the
        models' scores on the rest), and flags: every model picks the same wrong option (the key is
        likely wrong), no model beats chance, a blind baseline answers it. Writes items.csv under
        <workspace>/evaluations/<source>/ and keeps the flags in the store; `benchsmith review push --flagged`
        sends the flagged questions back to Label Studio, and once a second look has decided one (confirmed,
        changed, withdrawn), this says so beside its flags.
        """
        from annotation.second_look import outcomes_on
        from benchsmith.console import console, table
        from evaluation.board import cell, collect
        from evaluation.items import STAGE, flag_verdicts, item_table

        c = context(ctx)
        with c.store(create=False) as store:
            source = _source(c, store, release, hub, candidates)
            items = item_table(collect(store, source))
            store.add_verdicts(flag_verdicts(items, source.label, store.get_verdicts(stage=STAGE, passed=False)))
            shown = items[items["flags"] != ""]
            looked = outcomes_on(store, source.label, list(shown["question_id"]))
        folder = out_folder(c.settings, source.label)
        items.to_csv(folder / "items.csv", index=False)
        console.print(table(f"Flagged questions: {len(shown)} of {len(items)}",
                            ["question", "dimension", "difficulty", "discrimination", "flags"],
                            [(r.question_id, r.dimension, cell(r.difficulty), cell(r.discrimination),
                              r.flags + (f" ({looked[r.question_id]} at a second look)"
                                         if r.question_id in looked else ""))
                             for r in shown.head(show).itertuples()]))
        console.print(f"written to {folder}")
