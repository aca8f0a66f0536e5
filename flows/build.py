"""The build flow: every stage in order, each doing only the work that is missing.

ingest -> richness -> (extract -> generate -> filter -> review push, as those stages land)
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from benchsmith.settings import Settings
from flows.ingest import ingest_stage
from flows.tasks import new_run_id


@flow(name="benchsmith-build")
def build_flow(settings: Settings, sources: list[str], scenes: int = 0, scenes_seed: int = 0) -> dict:
    run_id = new_run_id()
    summary: dict = {"run": run_id}
    if scenes:
        from benchsmith.scenes import make_scenes
        manifest = make_scenes(settings.workspace / "scenes" / f"seed{scenes_seed}-n{scenes}", scenes, scenes_seed)
        sources = [str(manifest), *sources]
    summary |= ingest_stage(settings, run_id, sources)
    return summary


def run_build(settings: Settings, sources: list[Path], *, scenes: int = 0, scenes_seed: int = 0) -> dict:
    missing = [str(s) for s in sources if not Path(s).exists()]
    if missing:
        from benchsmith.errors import BenchsmithError
        raise BenchsmithError(f"no such source: {', '.join(missing)}")
    return build_flow(settings, [str(Path(s).resolve()) for s in sources], scenes=scenes, scenes_seed=scenes_seed)
