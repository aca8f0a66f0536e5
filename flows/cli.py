"""The commands that run whole flows (`build`, `finish`) and the run report, added to the CLI by
`register`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from benchsmith.console import console
from ingest.cli import ImageColumn, ImagesFolder, License, SourceName, TaskKind, Workers, check_task_kind


def register(app: typer.Typer, context) -> None:
    """Add the flow commands to `app`; `context(ctx)` gives the settings and the store."""

    @app.command()
    def build(
        ctx: typer.Context,
        sources: Annotated[Optional[list[Path]], typer.Argument(
            help="Image folders, manifests, datasets, COCO .json or YOLO .yaml files to ingest.")] = None,
        scenes: Annotated[int, typer.Option(help="Also render and ingest this many oracle scenes.")] = 0,
        scenes_seed: Annotated[int, typer.Option(help="Seed for the oracle scenes.")] = 0,
        source: SourceName = "",
        license: License = "",
        image_column: ImageColumn = None,
        images: ImagesFolder = None,
        workers: Workers = 1,
        task: TaskKind = "",
    ) -> None:
        """Grow the benchmark: ingest -> extract -> generate -> blind filter -> push to review, as one Prefect flow.

        Every stage does only the work that is missing, so the command can be stopped at any point and run
        again. Prefect runs in ephemeral mode unless PREFECT_API_URL points at a server. Review tasks are
        pushed when LABEL_STUDIO_API_KEY is set (see `benchsmith labelstudio up`). Ends with a run report.
        """
        from benchsmith.console import stage_progress
        from flows.build import run_build

        from benchsmith.llm_server import serving

        c = context(ctx)
        check_task_kind(c.settings, task, sources or [])
        with serving(c.settings, console.print), stage_progress():
            summary = run_build(c.settings, sources or [], scenes=scenes, scenes_seed=scenes_seed,
                                ingest_options={"source": source, "license": license, "image_column": image_column,
                                                "images": str(images) if images else None,
                                                "workers": workers, "task": task})
        _print_summary(summary)
        if "skipped" not in summary["review"]:
            from annotation.settings import ReviewSettings

            review = c.settings.section("review", ReviewSettings)
            # each kind went to its own project: name every one this run sent tasks to
            projects = [r["project"] for r in summary["review"].values() if "project" in r] or [review.project]
            names = ", ".join(f'"{title}"' for title in projects)
            console.print(f"Review tasks wait in Label Studio at {c.settings.services.label_studio_url}, "
                          f"{'projects' if len(projects) > 1 else 'project'} {names}, "
                          f"{review.overlap} review(s) each (review.overlap). "
                          "`benchsmith labelstudio up` prints the annotators' guide; `benchsmith review annotators "
                          "invite` the signup link to send them.", highlight=False, markup=False)


    @app.command()
    def finish(
        ctx: typer.Context,
        version: Annotated[Optional[str], typer.Option(help="Publish this version (default: publish.version; "
                                                            "without one, nothing is published).")] = None,
        push: Annotated[Optional[str], typer.Option(help="Also upload to this Hub repository, org/name (HF_TOKEN).")] = None,
    ) -> None:
        """Close a round of review: pull the annotations, decide each question, publish, and report.

        Questions without enough annotations stay in review for the next round. Prints what the pull decided
        with the agreement per dimension, how often annotators changed each generator's answers or discarded
        its questions, the ties waiting for a deciding annotation, the release's questions per config, and
        where the report is.
        """
        from annotation.cli import print_round
        from annotation.pull import pull_line
        from benchsmith.console import stage_progress
        from publish.cli import release_table
        from flows.build import finish_flow
        from flows.tasks import on_task_runner

        c = context(ctx)
        with stage_progress():
            summary = on_task_runner(finish_flow, c.settings)(c.settings, version, push)
        console.print(f"[bold]run[/]: {escape(summary['run'])}")
        console.print(f"[bold]review[/]: {escape(pull_line(summary['review']))}")
        with c.store() as store:
            print_round(store, c.settings, summary["review"]["flagged"])
        released = summary["publish"]["publish"]
        if isinstance(released, dict):
            console.print(release_table(released["version"], released["questions"], released.get("folder", ""),
                                        released["configs"]))
            if released.get("pushed"):
                console.print(f"pushed to {escape(str(released['pushed']))}")
        else:
            console.print(f"[bold]publish[/]: {escape(released)}")
        report = summary["report"]
        console.print(f"[bold]report[/]: {escape(report['report'])}" + (" (unchanged)" if report.get("cached") else ""))


    @app.command()
    def report(
        ctx: typer.Context,
        run: Annotated[Optional[str], typer.Option(help="Only this run's stage timings (default: every run).")] = None,
        out: Annotated[Optional[Path], typer.Option(help="Folder for report.md and its plots "
                                                         "(default: <workspace>/reports/<run or 'all'>).")] = None,
    ) -> None:
        """Write the run report: funnel per dimension, blind accuracy before and after filtering, review against
        the generators (changed answers, discards and why, ties waiting), answer balance, tokens and cost, time
        per stage, and failures by reason (markdown with PNG plots)."""
        from annotation.settings import ReviewSettings
        from flows.report import write_report

        c = context(ctx)
        with c.store(create=False) as store:
            path = write_report(store, out or c.settings.workspace / "reports" / (run or "all"), run,
                                c.settings.section("review", ReviewSettings))
        console.print(f"report: {path}")


# Keys of a stage's stats that are for machines (cache keys, the stage's internal name) or have a column.
HIDDEN = {"key", "config_key", "stage", "seconds", "cached", "shards"}


def _outcome(result) -> str:
    """A stage's stats in words: its non-zero counts, nested counts after their name, the rest as text."""
    if not isinstance(result, dict):
        return str(result)
    if result.get("cached"):
        return "inputs unchanged since its last run: nothing to do" + (
            f" (last report: {result['report']})" if "report" in result else "")
    parts = []
    for key, value in result.items():
        name = key.replace("_", " ")
        if key in HIDDEN or value in (0, 0.0, {}, [], "", None):
            continue
        if isinstance(value, dict):
            parts.append(f"{name}: " + ", ".join(f"{k} {v}" for k, v in value.items()))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            parts.append(f"{value:,} {name}" if isinstance(value, int) else f"{value:g} {name}")
        else:
            parts.append(f"{name}: {value}")
    return ", ".join(parts) or "nothing to do"


def _print_summary(summary: dict) -> None:
    """One row per stage (an extractor, a generator: each its own) with what it did and how long it took."""
    from benchsmith.console import table

    rows = []
    for stage, result in summary.items():
        if stage == "run":
            continue
        nested = isinstance(result, dict) and result and all(isinstance(v, dict) for v in result.values())
        for name, value in (result.items() if nested else [(stage, result)]):
            seconds = value.get("seconds") if isinstance(value, dict) else None
            rows.append((name, _outcome(value), f"{seconds:.1f} s" if seconds else ""))
    console.print(f"[bold]run[/]: {escape(summary['run'])}")
    console.print(table("build", ["stage", "result", "time"], rows))
