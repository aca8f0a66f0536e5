"""Commands of this stage, added to the `benchsmith` CLI by `register`."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer


def register(app: typer.Typer, context) -> None:
    """Add this stage's commands to `app`; `context(ctx)` gives the settings and the store."""

    @app.command("filter")
    def filter_command(
        ctx: typer.Context,
        limit: Annotated[Optional[int], typer.Option(min=1, help="Judge at most this many pending questions.")] = None,
        report_only: Annotated[bool, typer.Option("--report-only", help="Judge nothing; print the report.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")] = False,
    ) -> None:
        """Drop the questions that text-only solvers answer without seeing the image.

        Each solver in `filter.blind.solvers` answers every candidate question not yet judged, under
        `rotations` circular orders of its options, and knows the answer only if right under all of
        them. Rule `seed` drops a question when every solver knows it; rule `mmstar` when more than
        `max_right` do. Every question gets a verdict naming the rule and each solver's choices; kept
        questions stay candidates for review. A rerun judges only new questions. The report shows blind
        accuracy per solver and dimension, before and after the filter, against chance.
        """
        from benchsmith.console import console, stage_progress
        from filters import blind

        c = context(ctx)
        config = blind.blind_settings(c.settings)
        with c.store() as store:
            run = None
            if not report_only:
                if not config.solvers:
                    from benchsmith.settings import SettingsError
                    raise SettingsError("filter.blind.solvers is empty: name at least one solver in your settings "
                                        "(the local profile ships offline ones)")
                solvers = blind.solvers_from(config, settings=c.settings, store=store)
                with stage_progress():
                    run = blind.apply(store, config, solvers, limit=limit)
            result = blind.report(store)
        if as_json:
            print(json.dumps({"run": blind.counts(run) if run else None, "report": result.as_dict()}, indent=2))
            return
        if run is not None:
            console.print(f"judged {run.done}, dropped {run.counters['dropped']}, kept {run.counters['kept']}"
                          + (f", {run.retry_later} left for the next run (a solver could not answer)"
                             if run.retry_later else ""))
        for table in report_tables(result):
            console.print(table)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def report_tables(result) -> list:
    from benchsmith.console import table
    from benchsmith.dimensions import registry

    names = {d.id: d.name for d in registry()}

    if not result.judged:
        return [table("Blind filter", ["note"], [["no question judged yet"]])]
    drops = table("Blind filter: drops per dimension", ["dimension", "judged", "dropped", "drop rate"], [
        [names.get(d, str(d)), result.judged[d], result.dropped[d], _percent(result.drop_rate(d))]
        for d in sorted(result.judged)])
    accuracy = table("Blind accuracy per solver (share of option orders answered right)",
                     ["dimension", "solver", "before", "after", "chance", "knows (before)"], [
        [names.get(r["dimension_id"], str(r["dimension_id"])), r["solver"], _percent(r["accuracy_before"]),
         _percent(r["accuracy_after"]), _percent(r["chance"]), _percent(r["knows_before"])]
        for r in result.solver_rows() if r["dimension_id"] is not None])
    before, after = result.overall(kept_only=False), result.overall(kept_only=True)
    overall = table("Blind accuracy per solver, all dimensions", ["solver", "before", "after"], [
        [solver, _percent(before[solver]), _percent(after.get(solver))] for solver in before])
    return [drops, accuracy, overall]
