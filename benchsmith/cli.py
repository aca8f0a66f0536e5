"""The `benchsmith` command line."""

from __future__ import annotations

import errno
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer
import yaml
from rich.markup import escape

from benchsmith.console import console, errors, progress_bar
from benchsmith.errors import BenchsmithError
from benchsmith.secrets import scrub
from benchsmith.settings import Settings, load_settings

app = typer.Typer(
    name="benchsmith",
    help="Build SEED-Bench-style multimodal multiple-choice benchmarks: ingest images, extract what is in "
         "them, generate questions, drop those a blind LLM can answer, review them in Label Studio, publish "
         "a Hugging Face dataset.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    add_completion=False,
)
scenes_app = typer.Typer(help="Synthetic oracle scenes with exact ground truth.", no_args_is_help=True)
config_app = typer.Typer(help="Inspect the effective settings.", no_args_is_help=True)
app.add_typer(scenes_app, name="scenes")
app.add_typer(config_app, name="config")


@dataclass
class Context:
    settings_path: Optional[Path]
    profile: Optional[str]
    workspace: Optional[Path]
    _settings: Optional[Settings] = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            env = None
            if self.workspace is not None:
                import os
                env = dict(os.environ, BENCHSMITH_WORKSPACE=str(self.workspace))
            self._settings = load_settings(self.settings_path, profile=self.profile, env=env)
        return self._settings

    def store(self):
        from benchsmith.store import Store
        return Store(self.settings.db_url)


def context(ctx: typer.Context) -> Context:
    return ctx.find_root().obj


@app.callback()
def main_options(
    ctx: typer.Context,
    settings: Annotated[Optional[Path], typer.Option(
        "--settings", "-s", help="Settings file merged over the defaults (default: ./benchsmith.yaml if present, "
                                 "or $BENCHSMITH_SETTINGS).")] = None,
    profile: Annotated[Optional[str], typer.Option(
        "--profile", "-p", help="Settings profile: 'local' (offline, CPU) or 'gpu' (production models).")] = None,
    workspace: Annotated[Optional[Path], typer.Option(
        "--workspace", "-w", help="Folder for the store, media and caches (default: ./bench).")] = None,
) -> None:
    ctx.obj = Context(settings, profile, workspace)


# ---------------------------------------------------------------------------------------------------

@app.command()
def ingest(
    ctx: typer.Context,
    sources: Annotated[list[Path], typer.Argument(
        help="Folders of images, .jsonl/.csv manifests (paths relative to the manifest, with optional "
             "annotations), or Hugging Face datasets (save_to_disk folders or .parquet).")],
    source: Annotated[str, typer.Option(help="Source name recorded on each item (default: the folder name).")] = "",
    license: Annotated[str, typer.Option(help="License recorded on items that do not name one.")] = "",
    image_column: Annotated[Optional[str], typer.Option(help="Image column of a Hugging Face dataset.")] = None,
    workers: Annotated[int, typer.Option(help="Processes that decode images in parallel.")] = 1,
    task: Annotated[str, typer.Option(help="Task kind of every row (data/reform_tasks.yaml: vqa, classification, "
                                           "matching, grounding, text_reading, ...): the rows are annotations for "
                                           "`benchsmith generate -g reform`. A `task` column does the same per row.")] = "",
) -> None:
    """Read image collections into the store.

    Every file is checked (readable, a real image, not truncated, not a decompression bomb, big enough,
    not a duplicate) and normalised to RGB with its EXIF orientation applied. Refused files are recorded
    with a reason and the run goes on; `benchsmith status` lists them. Re-ingesting adds nothing new.
    """
    from benchsmith.ingest import ingest_sources

    c = context(ctx)
    if task:
        from generators.reform import load_tasks
        from generators.stage import STAGE, GenerateSettings

        known = load_tasks(c.settings.section(STAGE, GenerateSettings).reform.tasks)
        if task not in known:
            raise typer.BadParameter(f"unknown task kind {task!r}; known: {', '.join(sorted(known))}", param_hint="--task")
    with c.store() as store:
        reports = ingest_sources(store, c.settings, sources, source=source, license=license,
                                 image_column=image_column, workers=workers, task=task)
    for location, report in reports:
        console.print(f"[bold]{location}[/]: {report.summary()}")


@app.command()
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")] = False,
    refused: Annotated[bool, typer.Option("--refused", help="Also list every refused input file with its reason.")] = False,
) -> None:
    """Show counts per stage, status and dimension."""
    from benchsmith.console import table
    from benchsmith.status import status_tables, store_status

    c = context(ctx)
    with c.store() as store:
        state = store_status(store)
        refusals = store.get_verdicts(stage="ingest", passed=False) if refused else []
    if as_json:
        print(json.dumps(state, indent=2, default=str))
        return
    console.print(f"store: {_safe_url(c.settings.db_url)}   profile: {c.settings.profile}")
    for t in status_tables(state):
        console.print(t)
    if refusals:
        console.print(table("Refused input files", ["file", "rule", "reason"],
                            [(v.subject_id, v.rule, v.reason) for v in refusals]))


@scenes_app.command("make")
def scenes_make(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write the images and manifest.jsonl into.")],
    n: Annotated[int, typer.Option("--n", min=1, help="How many scenes.")] = 50,
    seed: Annotated[int, typer.Option(help="Seed; the same seed always renders the same scenes.")] = 0,
) -> None:
    """Render synthetic scenes with exact ground truth (shapes, colours, sizes, positions, counts, sign text).

    The manifest is in ingest format, so `benchsmith ingest OUT/manifest.jsonl` brings the truth in as
    supplied annotations.
    """
    from benchsmith.scenes import make_scenes

    with progress_bar("rendering scenes", n) as advance:
        manifest = make_scenes(out, n, seed, progress=advance)
    console.print(f"wrote {n} scenes and {manifest}")


@config_app.command("show")
def config_show(ctx: typer.Context) -> None:
    """Print the effective settings (defaults, settings file, profile, environment), secrets masked."""
    print(yaml.safe_dump(context(ctx).settings.masked(), sort_keys=False), end="")


@app.command()
def build(
    ctx: typer.Context,
    sources: Annotated[Optional[list[Path]], typer.Argument(help="Image folders, manifests or datasets to ingest.")] = None,
    scenes: Annotated[int, typer.Option(help="Also render and ingest this many oracle scenes.")] = 0,
    scenes_seed: Annotated[int, typer.Option(help="Seed for the oracle scenes.")] = 0,
) -> None:
    """Grow the benchmark: ingest -> extract -> generate -> blind filter -> push to review, as one Prefect flow.

    Every stage does only the work that is missing, so the command can be stopped at any point and run
    again. Prefect runs in ephemeral mode unless PREFECT_API_URL points at a server. Review tasks are
    pushed when LABEL_STUDIO_API_KEY is set (see `benchsmith labelstudio up`). Ends with a run report.
    """
    from flows.build import run_build

    c = context(ctx)
    summary = run_build(c.settings, sources or [], scenes=scenes, scenes_seed=scenes_seed)
    _print_summary(summary)
    if "skipped" not in summary["review"]:
        from annotation.server import annotator_guide
        from annotation.settings import ReviewSettings

        console.print(annotator_guide(c.settings, c.settings.section("review", ReviewSettings)))


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
    from benchsmith.publish.cli import release_table
    from flows.build import finish_flow

    c = context(ctx)
    summary = finish_flow(c.settings, version, push)
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


def _print_summary(summary: dict) -> None:
    def show(name: str, result) -> None:
        if isinstance(result, dict) and result.get("cached"):
            result = "inputs unchanged since its last run: nothing to do" + (
                f" (last report: {result['report']})" if "report" in result else "")
        console.print(f"[bold]{escape(name)}[/]: {escape(str(result))}")

    for stage, result in summary.items():
        if isinstance(result, dict) and result and all(isinstance(v, dict) for v in result.values()):
            for name, value in result.items():
                show(name, value)
        else:
            show(stage, result)


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
    from benchsmith.report import write_report

    c = context(ctx)
    with c.store() as store:
        path = write_report(store, out or c.settings.workspace / "reports" / (run or "all"), run,
                            c.settings.section("review", ReviewSettings))
    console.print(f"report: {path}")


# ---------------------------------------------------------------------------------------------------

def _safe_url(url: str) -> str:
    import sqlalchemy as sa
    return sa.make_url(url).render_as_string(hide_password=True)


def _register_stage_commands() -> None:
    """Each stage package adds its own commands."""
    from annotation import cli as annotation_cli
    from extractors import cli as extractors_cli
    from filters import cli as filters_cli
    from generators import cli as generators_cli
    from benchsmith.publish import cli as publish_cli
    from evaluation import cli as evaluation_cli

    for module in (extractors_cli, generators_cli, filters_cli, annotation_cli, publish_cli, evaluation_cli):
        module.register(app, context)


_register_stage_commands()


WRITE_ERRORS = {errno.EACCES, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EPERM, errno.EFBIG}


def _fail(message: str) -> None:
    errors.print(f"[bold red]error:[/] {escape(scrub(message))}", highlight=False)
    sys.exit(2)


def main() -> None:
    import sqlalchemy as sa

    try:
        app()
    except BenchsmithError as exc:
        _fail(str(exc))
    except OSError as exc:
        if exc.errno not in WRITE_ERRORS:
            raise
        _fail(f"cannot write {exc.filename or 'a file'}: {exc.strerror}. Finished work is saved; "
              "free space or fix permissions, then rerun the command to go on.")
    except sa.exc.OperationalError as exc:
        _fail(f"the store could not be used: {exc.orig}. Finished work is saved; fix it and rerun.")
    except sa.exc.DatabaseError as exc:  # "database disk image is malformed": a truncated or corrupted file
        from benchsmith.store import damaged_store_message

        _fail(damaged_store_message("", exc))
    except KeyboardInterrupt:
        errors.print("interrupted; finished work is saved, rerun the command to go on")
        sys.exit(130)
