"""The generate stage as Prefect tasks on a real Prefect server: done once, then nothing runs."""

from __future__ import annotations

from benchsmith.store import Store
from tests.generators.test_stage import add_oracle


def test_generate_stage_runs_each_generator_once_then_reuses_the_cached_result(prefect_api, settings, oracle_dir):
    from flows.generate import generate_flow

    with Store(settings.db_url) as store:
        add_oracle(store, oracle_dir, 3)
    first = generate_flow(settings)
    assert first["generate programmatic"]["jobs"] == 18 and first["generate programmatic"]["kept"] > 0
    assert first["generate temporal"] == {"cached": True}  # no videos: no task at all
    with Store(settings.db_url) as store:
        runs = store.get_stage_runs()
        questions = len(store.get_questions())
    assert {r["stage"] for r in runs} == {"generate:programmatic"}

    second = generate_flow(settings)
    assert second == {name: {"cached": True} for name in first}  # nothing pending: nothing runs
    with Store(settings.db_url) as store:
        assert len(store.get_stage_runs()) == len(runs) and len(store.get_questions()) == questions
