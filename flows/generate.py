"""The generate flow: one stage per configured generator, each doing only the missing jobs.

LLM work runs under the Prefect tag `openai`, so a tag concurrency limit (`prefect concurrency-limit create
openai 1`) holds it across flows; inside, the LLM client's own concurrency and rate limits apply, and its
call cache means a retried task pays for nothing twice. Jobs a run left unanswered (HTTP failures) stay
pending, so the next run tries them again.
"""

from __future__ import annotations

from functools import partial

from prefect import flow

from benchsmith.settings import Settings
from flows.tasks import new_run_id, run_stage


def generate_stage(settings: Settings, run_id: str) -> dict:
    """One stage per generator in `generate.generators`; callable inside any flow."""
    from generators.stage import build_stages, run_stages

    results = {}
    for stage in build_stages(settings):
        if settings.prefect.task_runner == "local":  # this process: the stage already built does the work
            def work(store, subjects, stage=stage) -> dict:
                return run_stages(store, [stage], subjects=subjects, workers=1)  # no forks inside a flow
        else:  # a worker builds its own from the settings (a built stage holds models and clients)
            work = partial(generate_shard, settings=settings, name=stage.name)
        results[f"generate {stage.generator}"] = run_stage(
            settings, run_id, stage.name, stage, work, sharded=True,
            tag="openai" if stage.uses_llm else "", group=stage.shard_group)
    return results


def generate_shard(store, subjects: list[str] | None, *, settings: Settings, name: str) -> dict:
    """Generator stage `name` over `subjects` (None: all it has pending), built afresh in the worker."""
    from generators.stage import build_stages, run_stages
    return run_stages(store, [s for s in build_stages(settings) if s.name == name], subjects=subjects, workers=1)


@flow(name="benchsmith-generate")
def generate_flow(settings: Settings) -> dict:
    return generate_stage(settings, new_run_id())
