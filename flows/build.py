"""The two flows a maintainer runs: `build` grows the benchmark, `finish` closes a round of review.

build:  scenes -> ingest -> richness -> extract -> richness -> generate -> blind filter -> review push -> report
finish: review pull (and reconcile) -> publish -> report

Each stage is a runner stage that does only the work its ledger shows missing, so either flow can be
stopped at any point and run again, and a rerun that changed nothing runs no stage.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from benchsmith.errors import BenchsmithError
from benchsmith.settings import Settings
from benchsmith.store import Store
from flows.extract import extract_stage
from flows.filter import filter_stage
from flows.generate import generate_stage
from flows.ingest import ingest_stage
from flows.publish import publish_stage
from flows.review import pull_stage, review_stage
from flows.tasks import Once, new_run_id, on_task_runner, run_stage


def report_stage(settings: Settings, run_id: str) -> dict:
    """The run report, written again only when the store's content has changed since the last one."""
    from annotation.settings import ReviewSettings
    from flows.report import content_token, write_report  # pandas and matplotlib: only when a report is made

    def write(store: Store) -> dict:
        review = settings.section("review", ReviewSettings)
        return {"report": str(write_report(store, settings.workspace / "reports" / run_id, run_id, review))}
    with Store(settings.db_url) as store:
        stage = Once("report", "report", content_token(store), write)
    return run_stage(settings, run_id, "report", stage, recorded=True, retry_failed=True)


@flow(name="benchsmith-build")
def build_flow(settings: Settings, sources: list[str], scenes: int = 0, scenes_seed: int = 0,
               ingest_options: dict | None = None) -> dict:
    run_id = new_run_id()
    summary: dict = {"run": run_id}
    if scenes:
        from ingest.scenes import make_scenes, scenes_key
        folder = settings.workspace / "scenes" / f"seed{scenes_seed}-n{scenes}"
        # done once per key: rendering again would rewrite the files and look like new input to ingest
        manifest = folder / "manifest.jsonl"  # a folder deleted since is rendered again
        stage = Once("scenes", lambda: f"{folder}:{'rendered' if manifest.exists() else 'missing'}",
                     scenes_key(scenes, scenes_seed),
                     lambda _store: {"manifest": str(make_scenes(folder, scenes, scenes_seed))})
        summary["scenes"] = run_stage(settings, run_id, "scenes", stage, recorded=True)
        sources = [summary["scenes"]["manifest"], *sources]
    summary["ingest"] = ingest_stage(settings, run_id, sources, ingest_options)
    summary["extract"] = extract_stage(settings, run_id)
    summary["generate"] = generate_stage(settings, run_id)
    summary["filter"] = filter_stage(settings, run_id)
    summary["review"] = review_stage(settings, run_id)
    summary["report"] = report_stage(settings, run_id)
    return summary


@flow(name="benchsmith-finish")
def finish_flow(settings: Settings, version: str | None = None, push: str | None = None) -> dict:
    run_id = new_run_id()
    summary: dict = {"run": run_id, "review": pull_stage(settings, run_id)}
    summary["publish"] = publish_stage(settings, run_id, version, push)
    summary["report"] = report_stage(settings, run_id)
    return summary


def run_build(settings: Settings, sources: list[Path], *, scenes: int = 0, scenes_seed: int = 0,
              ingest_options: dict | None = None) -> dict:
    missing = [str(s) for s in sources if not Path(s).exists()]
    if missing:
        raise BenchsmithError(f"no such source: {', '.join(missing)}")
    return on_task_runner(build_flow, settings)(settings, [str(Path(s).resolve()) for s in sources], scenes=scenes,
                                                 scenes_seed=scenes_seed, ingest_options=ingest_options)
