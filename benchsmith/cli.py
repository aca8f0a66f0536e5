"""The kernel of the `benchsmith` command line: the root app, its global options, `status`, `config show`
and the one way errors are shown. Stage packages add their commands through `register(app, context)`;
`flows.app` puts the whole program together."""

from __future__ import annotations

import errno
import gc
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer
import yaml
from rich.markup import escape

from benchsmith.console import console, errors
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
config_app = typer.Typer(help="Inspect the effective settings.", no_args_is_help=True)
app.add_typer(config_app, name="config")
llm_app = typer.Typer(help="A local chat model (serve, stop) and LLM calls made as batch jobs (collect).",
                      no_args_is_help=True)
batches_app = typer.Typer(help="Batch jobs of LLM calls: collect their answers.", no_args_is_help=True)
llm_app.add_typer(batches_app, name="batches")
app.add_typer(llm_app, name="llm")


@dataclass
class Context:
    settings_path: Optional[Path]
    profile: Optional[str]
    workspace: Optional[Path]
    _settings: Optional[Settings] = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            env = None if self.workspace is None else dict(os.environ, BENCHSMITH_WORKSPACE=str(self.workspace))
            self._settings = load_settings(self.settings_path, profile=self.profile, env=env)
        return self._settings

    def store(self, *, create: bool = True):
        """The store; read-only commands pass create=False, so a mistyped workspace is an error, not an
        empty store made on the spot."""
        from benchsmith.store import Store
        return Store(self.settings.db_url, create=create)


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
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")] = False,
    refused: Annotated[bool, typer.Option("--refused", help="Also list every refused input file with its reason.")] = False,
) -> None:
    """Show counts per stage, status and dimension."""
    from benchsmith.console import table
    from benchsmith.status import status_tables, store_status

    c = context(ctx)
    with c.store(create=False) as store:
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


@config_app.command("show")
def config_show(ctx: typer.Context) -> None:
    """Print the effective settings (defaults, settings file, profile, environment), secrets masked."""
    print(yaml.safe_dump(context(ctx).settings.masked(), sort_keys=False), end="")


@llm_app.command("serve")
def llm_serve(
    ctx: typer.Context,
    model: Annotated[Optional[str], typer.Option(
        help="smollm2, qwen2.5-coder-1.5b (data/local_models.yaml) or a GGUF file's path; default llm_server.model.")] = None,
    port: Annotated[Optional[int], typer.Option(help="Port on 127.0.0.1; default llm_server.port.")] = None,
    threads: Annotated[Optional[int], typer.Option(min=1, help="llama.cpp threads; default llm_server.threads (1).")] = None,
    detach: Annotated[bool, typer.Option("--detach", help="Start it in the background and return once it is "
                                                           "ready; `benchsmith llm stop` stops it.")] = False,
) -> None:
    """Serve a local chat model (llama.cpp, OpenAI-compatible, JSON-schema output) on loopback.

    Every stage that talks to an LLM uses it when services.openai_base_url (or OPENAI_BASE_URL) is the
    address printed here. The model comes from an installed package; nothing is downloaded. Without
    --detach it runs until Ctrl-C."""
    from benchsmith import llm_server

    app_context = context(ctx)
    settings = app_context.settings
    chosen = {k: v for k, v in {"model": model, "port": port, "threads": threads}.items() if v is not None}
    if chosen:
        raw = dict(settings.raw, llm_server={**(settings.raw.get("llm_server") or {}), **chosen})
        settings = settings.model_copy(update={"raw": raw})
    options = llm_server.server_settings(settings)
    if detach:
        info = llm_server.start_detached(settings, app_context.settings_path)
        console.print(f"model server ready: {info['url']} ({info['model']}, pid {info['pid']}); "
                      f"stop it with `benchsmith llm stop`")
        return
    console.print(f"serving {options.model} at {llm_server.url(options)} with {options.threads} thread(s); Ctrl-C stops it")
    llm_server.serve(settings)


@llm_app.command("stop")
def llm_stop(ctx: typer.Context) -> None:
    """Stop the model server `benchsmith llm serve --detach` started in this workspace."""
    from benchsmith import llm_server

    settings = context(ctx).settings
    info = llm_server.stop(settings)
    console.print(f"stopped the model server at {info['url']} (pid {info['pid']})" if info
                  else f"no model server runs for workspace {settings.workspace}")


@batches_app.command("collect")
def batches_collect(
    ctx: typer.Context,
    wait: Annotated[bool, typer.Option("--wait", help="Poll until every job has ended, with progress.")] = False,
    poll_s: Annotated[float, typer.Option(min=0.01, help="First wait between polls; doubled after each poll, "
                                                          "up to ten minutes.")] = 30.0,
) -> None:
    """Store the answers of every batch job of OPENAI_BASE_URL that has ended, as live answers are stored.

    The next run of each stage that queued them (generate, filter, evaluate, build) then finds its answers
    and finishes the units that waited. Requests a job left unanswered (expired, cancelled, malformed
    lines) go out again in that run's batch.
    """
    from benchsmith.console import progress_bar
    from benchsmith.llm import LlmClient, LlmOptions
    from benchsmith.llm_batch import collect
    from benchsmith.status import batch_jobs, batch_table

    c = context(ctx)
    with c.store() as store:
        client = LlmClient(c.settings, LlmOptions(), store)
        waiting = sum(job["requests"] for job in store.get_llm_batches(open_only=True))
        with progress_bar("batch requests answered", waiting) as advance:
            shown = [0]

            def progress(answered: int, _requests: int) -> None:
                advance(max(0, answered - shown[0]))
                shown[0] = max(shown[0], answered)

            jobs = batch_jobs(collect(client, wait=wait, poll_s=poll_s, progress=progress))
        running = len(store.get_llm_batches(open_only=True))
    console.print(batch_table(jobs) if jobs else "no batch jobs to collect")
    if running:
        console.print(f"{running} job(s) still running: collect again later, or with --wait")
    else:
        console.print("rerun the stages that queued these requests to finish their work")


# ---------------------------------------------------------------------------------------------------

def _safe_url(url: str) -> str:
    import sqlalchemy as sa
    return sa.make_url(url).render_as_string(hide_password=True)


WRITE_ERRORS = {errno.EACCES, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EPERM, errno.EFBIG}


def _fail(message: str) -> None:
    errors.print(f"[bold red]error:[/] {escape(scrub(message))}", highlight=False)
    sys.exit(2)


def main() -> None:
    import sqlalchemy as sa

    # The store, the media and Label Studio's data (which holds the admin's token) are the user's alone:
    # everything this process and the servers it starts write is closed to other local users.
    os.umask(os.umask(0o077) | 0o077)
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
    finally:
        # The process ends here. Frozen objects are left out of the collector's last walk over every
        # object at exit (0.3-0.5 s after a command that loaded openai and the stages); files and
        # connections still close as their modules are torn down.
        gc.freeze()
