"""The generate flow: one cached stage per configured generator, each doing only the missing jobs.

A generator's stage is skipped (its stored result returned) while the items, facts and LLM call log it
reads are unchanged since it last ran. A run that left LLM jobs unanswered (HTTP failures) wrote to the
call log, so the next run is not skipped and tries them again. LLM work runs under the Prefect tag
`openai`, so a tag concurrency limit (`prefect concurrency-limit create openai 1`) holds it across flows;
inside, the LLM client's own concurrency and rate limits apply, and its call cache means a retried task
pays for nothing twice.
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import partial

from prefect import flow, tags

from benchsmith.settings import Settings
from flows.tasks import new_run_id, run_sharded

READS = ("items", "facts", "llm_calls")


def generate_stage(settings: Settings, run_id: str) -> dict:
    """One stage per generator in `generate.generators`; callable inside any flow. A generator with no
    pending job runs no task at all; otherwise its cache key is the set of pending jobs under its config."""
    from benchsmith import runner
    from benchsmith.store import Store
    from generators.stage import build_stages, run_stages

    results = {}
    for stage in build_stages(settings):
        with Store(settings.db_url) as store:
            pending = runner.pending(stage, store)
            token = runner.cache_token(stage, store, pending)
        if not pending:
            results[f"generate {stage.generator}"] = {"jobs": 0, "cached": True}
            continue

        if settings.prefect.task_runner == "local":  # this process: the stage already built does the work
            def work(store, subjects, stage=stage) -> dict:
                return run_stages(store, [stage], subjects=subjects, workers=1)  # no forks inside a flow
        else:  # a worker builds its own from the settings (a built stage holds models and clients)
            work = partial(generate_shard, settings=settings, name=stage.name)
        with tags("openai") if stage.uses_llm else nullcontext():
            results[f"generate {stage.generator}"] = run_sharded(
                settings, run_id, stage.name, work, [stage.subject(u) for u in pending], reads=READS,
                sections=("generate",), input_token=token, group=stage.shard_group)
    return results


def generate_shard(store, subjects: list[str] | None, *, settings: Settings, name: str) -> dict:
    """Generator stage `name` over `subjects` (None: all it has pending), built afresh in the worker."""
    from generators.stage import build_stages, run_stages
    return run_stages(store, [s for s in build_stages(settings) if s.name == name], subjects=subjects, workers=1)


@flow(name="benchsmith-generate")
def generate_flow(settings: Settings) -> dict:
    return generate_stage(settings, new_run_id())
