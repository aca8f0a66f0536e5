"""Commands of this stage, added to the `benchsmith` CLI by `register`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def register(app: typer.Typer, context) -> None:
    """Add this stage's commands to `app`; `context(ctx)` gives the settings and the store."""
    @app.command()
    def generate(
        ctx: typer.Context,
        generator: Annotated[Optional[list[str]], typer.Option(
            "--generator", "-g", help="Only this generator: programmatic, llm, temporal, reform, textrich, "
                                      "image_sets or conversation (repeatable; default: generate.generators in the settings).")] = None,
        dimension: Annotated[Optional[list[str]], typer.Option(
            "--dimension", "-d", help="Only this dimension, by key or id (repeatable; default: every "
                                      "dimension the generators support).")] = None,
        limit: Annotated[Optional[int], typer.Option(
            min=1, help="Do at most this many (item, dimension) jobs now; the rest wait for the next run.")] = None,
    ) -> None:
        """Write questions for every item and dimension not yet done under the current settings.

        Programmatic questions come from labels, boxes, attributes and OCR with exact answers; LLM
        questions from per-dimension prompt templates (generators/prompts/) against OPENAI_BASE_URL;
        temporal questions from video annotations; reform questions (`-g reform`) from annotated datasets
        ingested with a task kind (VQA answers, class labels, captions, referring expressions, OCR ground
        truth; data/reform_tasks.yaml), the key being the annotation itself; conversation writes one
        three-turn conversation per image (perception, reasoning, creation) with references and focus
        points, turn by turn from the templates in generators/prompts/conversation/ (--dimension does not
        apply to it); image_sets asks about the images of scene sets (`scenes make --sets`) together. Every
        question passes the quality gate (dropped ones are kept with the reason) and answer letters are
        balanced. Rerunning does only what is missing;
        editing a dimension's prompt template (or the model) generates that dimension again and marks the
        questions it replaces as superseded. LLM calls already answered are read from the store, never
        paid for twice.
        """
        from benchsmith.console import console, stage_progress, table
        from generators.stage import build_stages, run_stages

        c = context(ctx)
        stages = build_stages(c.settings, generators=generator or (), dimensions=dimension or ())
        with c.store() as store, stage_progress():
            report = run_stages(store, stages, limit=limit)
        dropped, failures, skipped = report.pop("dropped"), report.pop("http_failures"), report.pop("skipped")
        console.print(table("generate", ["what", "count"], [*report.items(),
                                                             *((f"dropped: {k}", v) for k, v in dropped.items())]))
        for reason, count in failures.items():
            console.print(f"[yellow]{count} job(s) got no answer from the LLM ({reason}); "
                          "rerun `benchsmith generate` to try them again[/]")
        for reason, count in skipped.items():
            console.print(f"[yellow]{count} source annotation(s) gave no question: {reason}[/]")
        if waiting := report["waiting_for_facts"]:
            console.print(f"[yellow]{waiting} job(s) wait for facts: run `benchsmith extract`, then generate again[/]")
