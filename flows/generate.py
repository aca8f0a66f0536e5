"""The generate flow: one task per configured generator, each doing only the missing (item, dimension) jobs.

LLM work is tagged `openai`, so a Prefect concurrency limit on that tag caps it across flows; inside the
task the LLM client's own concurrency and rate limits apply, and its call cache makes a retried task
pay for nothing twice.
"""

from __future__ import annotations

from prefect import flow

from benchsmith.settings import Settings
from benchsmith.store import Store
from flows.tasks import new_run_id, stage_task, timed


def _generate_with(settings: Settings, run_id: str, generator: str, settings_fingerprint: str,
                   store_state: str) -> dict:
    from generators.stage import run_generate

    with Store(settings.db_url) as store:
        return timed(store, run_id, f"generate:{generator}",
                     lambda: run_generate(store, settings, generators=[generator]))


def generate_stage(settings: Settings, run_id: str) -> dict:
    """Tasks for each generator in `generate.generators`; callable inside any flow."""
    from generators.stage import STAGE, GenerateSettings

    fingerprint = settings.fingerprint()
    results = {}
    for generator in settings.section(STAGE, GenerateSettings).generators:
        task = stage_task(f"generate-{generator}", settings, _generate_with)
        if generator == "llm":
            task = task.with_options(tags=["openai"])
        with Store(settings.db_url) as store:
            state = store.state_token()
        results[f"generate {generator}"] = task(settings, run_id, generator, fingerprint, state)
    return results


@flow(name="benchsmith-generate")
def generate_flow(settings: Settings) -> dict:
    return generate_stage(settings, new_run_id())
