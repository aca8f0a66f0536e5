"""Commands of this stage, added to the `benchsmith` CLI by `register`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def release_table(version: str, n_questions: int, folder: str | Path, per_config: dict[str, int]):
    from benchsmith.console import table

    return table(f"Release {version}: {n_questions} questions in {folder}", ["config", "n"], sorted(per_config.items()))


def register(app: typer.Typer, context) -> None:
    """Add this stage's commands to `app`; `context(ctx)` gives the settings and the store."""

    @app.command()
    def publish(
        ctx: typer.Context,
        version: Annotated[str, typer.Option("--version", "-v", help="Version name, e.g. v1.0. Publishing the same "
                                             "version again with the same questions rebuilds its folder.")],
        out: Annotated[Optional[Path], typer.Option(help="Folder to write (default: WORKSPACE/releases/VERSION).")]
        = None,
        push: Annotated[Optional[str], typer.Option(help="Also upload to this Hugging Face dataset repository "
                                                    "(org/name), using the token in HF_TOKEN.")] = None,
        allow_changes: Annotated[bool, typer.Option(help="Publish questions whose content changed since the "
                                                    "previous version; they are listed as changed.")] = False,
        withdraw: Annotated[Optional[list[str]], typer.Option(
            help="Question id to leave out of this and every later version (repeatable); listed as removed.")]
        = None,
    ) -> None:
        """Publish the accepted questions as a versioned Hugging Face dataset folder.

        The folder holds parquet shards with one config per dimension plus `all` (the SEED-Bench columns
        that lmms-eval reads), a VLMEvalKit TSV, a dataset card with counts and plots, release.json with
        each question's content hash, and a CHANGELOG of what was added, removed or changed since the
        previous version. Images are re-encoded without any metadata. It loads offline with
        `datasets.load_dataset(FOLDER)`.
        """
        from benchsmith.console import console, progress_bar
        from publish.release import publish as build_release
        from publish.settings import PublishSettings

        c = context(ctx)
        with c.store() as store:
            total = sum(n for (_dimension, status), n in store.question_counts().items()
                        if status in ("accepted", "published"))
            with progress_bar("publishing", total) as advance:
                result = build_release(store, c.settings, version, out=out, repo=push or "",
                                       allow_changes=allow_changes, withdraw=withdraw or (), progress=advance)
        console.print(release_table(result.version, result.n_questions, result.folder, result.per_config))
        if result.changes.previous:
            console.print(f"since {result.changes.previous}: {len(result.changes.added)} added, "
                          f"{len(result.changes.removed)} removed, {len(result.changes.changed)} changed")
        if push:
            from publish.push import push_release

            private = c.settings.section("publish", PublishSettings).private
            token = c.settings.secrets.hf_token
            url = push_release(result.folder, push, token.get_secret_value() if token else None, private=private)
            console.print(f"pushed to {url}")

    @app.command()
    def stats(
        ctx: typer.Context,
        status: Annotated[Optional[list[str]], typer.Option(
            help="Count and balance only questions in this status (repeatable): candidate, dropped, in_review, "
                 "accepted, rejected, published. Default: all.")] = None,
        out: Annotated[Optional[Path], typer.Option(help="Also write the tables as CSV and the plots as PNG here.")]
        = None,
    ) -> None:
        """Tables (and optionally plots) of the questions at any stage: status by dimension, the funnel from
        generated to published, questions per dimension and the balance of answer letters."""
        from benchsmith.console import console, table
        from publish import stats as question_stats
        from publish.release import PublishError

        unknown = set(status or []) - set(question_stats.STATUSES)
        if unknown:
            raise PublishError(f"unknown status {', '.join(sorted(unknown))}; choose from "
                               f"{', '.join(question_stats.STATUSES)}")
        with context(ctx).store(create=False) as store:
            frame = question_stats.question_frame(store)
        tables = question_stats.stats_tables(frame, status)
        for name, frame_ in tables.items():
            console.print(table(name.replace("_", " ").capitalize(), list(map(str, frame_.columns)),
                                frame_.itertuples(index=False)))
        if out:
            written = question_stats.write_stats(tables, out)
            console.print(f"wrote {len(written)} files to {out}")
