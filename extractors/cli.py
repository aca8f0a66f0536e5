"""Commands of this stage, added to the `benchsmith` CLI by `register`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def register(app: typer.Typer, context) -> None:
    """Add this stage's commands to `app`; `context(ctx)` gives the settings and the store."""

    @app.command()
    def extract(
        ctx: typer.Context,
        only: Annotated[Optional[list[str]], typer.Option(
            "--only", help="Run just this configured extractor (repeatable) instead of those in extract.use.")] = None,
        retry_failed: Annotated[Optional[bool], typer.Option(
            "--retry-failed/--no-retry-failed",
            help="Try again the images an extractor failed on (default: extract.retry_failed).")] = None,
        limit: Annotated[Optional[int], typer.Option(
            min=1, help="At most this many images per extractor in this run.")] = None,
    ) -> None:
        """Describe each image in facts: captions, tags, labelled boxes, region captions, OCR lines.

        Runs the extractors listed in the settings (`extract.use`; the `local` profile uses the supplied
        annotations and RapidOCR, the `gpu` profile BLIP-2, Florence-2, CLIP, SAM and PaddleOCR). Each one
        works only on images that lack its facts, so a rerun loads no model and ends in seconds. An image
        that fails is recorded with its reason and the run goes on; `benchsmith status` lists failures.
        Afterwards the caption-richness filter judges images that have gained captions.
        """
        from benchsmith.console import console, stage_progress, table
        from extractors.run import extract as run_extract
        from ingest import richness

        c = context(ctx)
        with c.store() as store:
            with stage_progress():
                reports = run_extract(store, c.settings, only=only, retry_failed=retry_failed, limit=limit)
            judged, excluded, readmitted = richness.apply(store, c.settings.ingest.richness)
        rows = [(name, r.config_key, r.pending, r.done, r.failed, r.counters["facts"], f"{r.seconds:.1f}")
                for name, r in reports.items()]
        console.print(table("extraction", ["extractor", "key", "pending", "done", "failed", "facts", "seconds"], rows))
        for name, report in reports.items():
            for reason, n in list(report.failures.items())[:5]:
                console.print(f"[yellow]{name} failed on {n} image(s): {reason}[/]")
            if len(report.failures) > 5:
                console.print(f"[yellow]{name}: {len(report.failures) - 5} more reasons (benchsmith status lists them)[/]")
        if judged:
            console.print(f"richness: judged {judged} images, excluded {excluded}"
                          + (f", readmitted {readmitted}" if readmitted else ""))
