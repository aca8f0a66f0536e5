"""`benchsmith eval`: score models on a release, print the leaderboard, analyse the items."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Optional

import typer

SOURCE_HELP = {
    "release": "A published version (e.g. v1) or a release folder (default: the latest version published).",
    "hub": "A dataset on the Hugging Face Hub, org/name (its `all` config, `test` split).",
    "candidates": "The store's questions not yet published (candidates, in review, accepted).",
}


def _source(c, store, release, hub, candidates):
    from publish.settings import releases_root
    from evaluation.sources import resolve

    return resolve(release=release, hub=hub, candidates=candidates, releases_root=releases_root(c.settings),
                   store=store, media_dir=c.settings.media_dir)


def _conversations(c, store, release, hub, candidates):
    from publish.settings import releases_root
    from evaluation.sources import resolve_conversations

    return resolve_conversations(release=release, hub=hub, candidates=candidates,
                                 releases_root=releases_root(c.settings), store=store, media_dir=c.settings.media_dir)


CONVERSATIONS_HELP = ("The three-turn conversations of the source instead of its questions: each model holds "
                      "every conversation and a judge LLM grades it (ConvEval, settings under "
                      "evaluate.conversations).")


def _run_conversations(c, model: list[str], release, hub, candidates, limit, as_json) -> None:
    from benchsmith import runner
    from benchsmith.console import console, progress_bar
    from evaluation.conveval import evaluate, prepare

    results = []
    with c.store() as store:
        label, conversations = _conversations(c, store, release, hub, candidates)
        for name in model:
            stage = prepare(store, c.settings, conversations, label, name)
            pending = len(runner.pending(stage, store))
            with progress_bar(f"{name} on {label} (conversations)", min(pending, limit) if limit else pending) as advance:
                report = evaluate(store, stage, limit=limit, progress=advance)
            results.append({"model": name, "run": stage.run.id, **report.as_dict()})
            if not as_json:
                console.print(
                    f"[bold]{name}[/] on {label}: {report.done} conversation-settings graded, {report.retry_later} "
                    f"left for the next run ({report.counters['http_calls']} requests sent, "
                    f"{report.counters['answer_cached'] + report.counters['judge_cached']} answered from the store)")
                for reason, n in report.failures.most_common(3):
                    console.print(f"  {n} x {reason}")
    if as_json:
        print(json.dumps(results, indent=2, default=str))


def _board_conversations(c, release, hub, candidates, as_json) -> None:
    from benchsmith.console import console
    from evaluation.conveval import board_markdown, scores

    with c.store(create=False) as store:
        label, _conversations_now = _conversations(c, store, release, hub, candidates)
        runs = [r for r in store.eval_runs(label) if r["protocol"] == "conveval"]
        boards = [(r["model"], scores(store.conversation_evals([r["id"]]))) for r in runs]
    opponents = sorted({json.dumps(r["config"]["opponent"], sort_keys=True) for r in runs})
    opponent = "the reference answers" if opponents in ([], ['"references"']) else "the reference model"
    folder = out_folder(c.settings, label)
    folder.mkdir(parents=True, exist_ok=True)
    markdown = board_markdown(boards, opponent)
    (folder / "conversations.md").write_text(markdown, encoding="utf-8")
    (folder / "conversations.json").write_text(json.dumps(dict(boards), indent=1), encoding="utf-8")
    if as_json:
        print(json.dumps(dict(boards), indent=2))
    elif not runs:
        console.print(f"no model has held the conversations of {label} yet: run "
                      "`benchsmith eval run --conversations --model NAME`")
    else:
        print(markdown)
        console.print(f"written to {folder}")


def out_folder(settings, label: str) -> Path:
    from evaluation.settings import EvalSettings

    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")[:100] or "source"
    return settings.workspace / settings.section("evaluate", EvalSettings).out_dir / slug


def register(app: typer.Typer, context) -> None:
    eval_app = typer.Typer(help="Score models on a release and find the questions the scores put in doubt.",
                           no_args_is_help=True)
    app.add_typer(eval_app, name="eval")

    @eval_app.command("run")
    def run_command(
        ctx: typer.Context,
        model: Annotated[list[str], typer.Option("--model", "-m", help="A model named under evaluate.models; "
                                                 "repeat for several.")],
        release: Annotated[Optional[str], typer.Option(help=SOURCE_HELP["release"])] = None,
        hub: Annotated[Optional[str], typer.Option(help=SOURCE_HELP["hub"])] = None,
        candidates: Annotated[bool, typer.Option("--candidates", help=SOURCE_HELP["candidates"])] = False,
        protocol: Annotated[Optional[str], typer.Option(
            help="An installed protocol: single (SEED-Bench), circular (every rotation of the options must be "
                 "right), instability (several prompt wordings x option shuffles), or a plugin's; default: "
                 "evaluate.protocol.")] = None,
        limit: Annotated[Optional[int], typer.Option(min=1, help="At most this many passes now.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
        conversations: Annotated[bool, typer.Option("--conversations", help=CONVERSATIONS_HELP)] = False,
    ) -> None:
        """Score models on a set of questions.

        Each answer is stored as it arrives (the raw output too), so an interrupted run goes on where it
        stopped, and a rerun of a finished one loads no model and sends no request. Models are configured
        by name under `evaluate.models`: `likelihood` (a transformers VLM ranks the options),
        `generate` (the same kind of model answers in words), `openai` (a chat endpoint answers) - the
        replies of these two are matched to an option - or `blind` (a text-only baseline from the blind
        filter).

        With --conversations, each `openai` model answers the three turns of every conversation in
        sequence (its own earlier answers in context, the image in the first turn), also with the
        reference answers of turn 1, and of turns 1-2, given in place of its own (the ablation); a judge
        LLM grades each turn and the whole conversation from 1 to 10 and against an opponent (win, tie,
        lose), under several prompts pooled.
        """
        if conversations:
            _run_conversations(context(ctx), model, release, hub, candidates, limit, as_json)
            return
        from benchsmith import runner
        from benchsmith.console import console, progress_bar
        from evaluation.stage import evaluate, prepare

        c = context(ctx)
        results = []
        with c.store() as store:
            source = _source(c, store, release, hub, candidates)
            for name in model:
                stage = prepare(store, c.settings, source, name, protocol)
                pending = len(runner.pending(stage, store))
                with progress_bar(f"{name} on {source.label}", min(pending, limit) if limit else pending) as advance:
                    report = evaluate(store, stage, limit=limit, progress=advance)
                results.append({"model": name, "run": stage.run.id, **report.as_dict()})
                if not as_json:
                    counts = report.counters
                    console.print(
                        f"[bold]{name}[/] on {source.label} ({stage.run.protocol}): {report.done} passes answered "
                        f"({counts['ok']} matched, {counts['unmatched']} unmatched), {counts['skipped']} skipped, "
                        f"{report.retry_later} left for the next run; {report.pending} were pending of "
                        f"{len(stage.passes)}")
                    for reason, n in report.failures.most_common(3):
                        console.print(f"  {n} x {reason}")
        if as_json:
            print(json.dumps(results, indent=2, default=str))

    @eval_app.command("board")
    def board_command(
        ctx: typer.Context,
        release: Annotated[Optional[str], typer.Option(help=SOURCE_HELP["release"])] = None,
        hub: Annotated[Optional[str], typer.Option(help=SOURCE_HELP["hub"])] = None,
        candidates: Annotated[bool, typer.Option("--candidates", help=SOURCE_HELP["candidates"])] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the board as JSON.")] = False,
        conversations: Annotated[bool, typer.Option("--conversations", help="The ConvEval board of the "
                                                    "source's conversations (conversations.md/json).")] = False,
    ) -> None:
        """Print and write the leaderboard of every model evaluated on a source.

        Accuracy per dimension and overall with 95% bootstrap intervals, the format-hit rate (answers
        matched to an option), instability (instability protocol) and skipped passes; blind baselines
        are shown beside the models. Writes board.md, board.png and board.json under
        <workspace>/evaluations/<source>/. With --conversations: direct scores per turn and overall, and
        pairwise win and tie rates, per model and ablation setting, in conversations.md and .json.
        """
        if conversations:
            _board_conversations(context(ctx), release, hub, candidates, as_json)
            return
        from benchsmith.console import console
        from evaluation.board import board_markdown, collect, leaderboard, plot_board
        from evaluation.settings import EvalSettings

        c = context(ctx)
        options = c.settings.section("evaluate", EvalSettings)
        with c.store(create=False) as store:
            source = _source(c, store, release, hub, candidates)
            board = leaderboard(collect(store, source), source, options.bootstrap)
        folder = out_folder(c.settings, source.label)
        folder.mkdir(parents=True, exist_ok=True)
        markdown = board_markdown(board)
        (folder / "board.md").write_text(markdown, encoding="utf-8")
        (folder / "board.json").write_text(json.dumps(board.as_dict(), indent=1), encoding="utf-8")
        if board.rows:
            plot_board(board, folder / "board.png")
        if as_json:
            print(json.dumps(board.as_dict(), indent=2))
            return
        if not board.rows:
            console.print(f"no model has been evaluated on {source.label} yet: run `benchsmith eval run --model NAME`")
            return
        print(markdown)
        console.print(f"written to {folder}")

    @eval_app.command("items")
    def items_command(
        ctx: typer.Context,
        release: Annotated[Optional[str], typer.Option(help=SOURCE_HELP["release"])] = None,
        hub: Annotated[Optional[str], typer.Option(help=SOURCE_HELP["hub"])] = None,
        candidates: Annotated[bool, typer.Option("--candidates", help=SOURCE_HELP["candidates"])] = False,
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
        from evaluation.board import collect
        from evaluation.items import STAGE, flag_verdicts, item_table

        c = context(ctx)
        with c.store(create=False) as store:
            source = _source(c, store, release, hub, candidates)
            items = item_table(collect(store, source))
            store.add_verdicts(flag_verdicts(items, source.label, store.get_verdicts(stage=STAGE, passed=False)))
            shown = items[items["flags"] != ""]
            looked = outcomes_on(store, source.label, list(shown["question_id"]))
        folder = out_folder(c.settings, source.label)
        folder.mkdir(parents=True, exist_ok=True)
        items.to_csv(folder / "items.csv", index=False)
        console.print(table(f"Flagged questions: {len(shown)} of {len(items)}",
                            ["question", "dimension", "difficulty", "discrimination", "flags"],
                            [(r.question_id, r.dimension, _fmt(r.difficulty), _fmt(r.discrimination),
                              r.flags + (f" ({looked[r.question_id]} at a second look)"
                                         if r.question_id in looked else ""))
                             for r in shown.head(show).itertuples()]))
        console.print(f"written to {folder}")


def _fmt(value) -> str:
    return "-" if value is None or value != value else f"{value:.2f}"
