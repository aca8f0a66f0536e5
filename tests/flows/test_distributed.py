"""The build flow's heavy stages sharded over a real Dask LocalCluster (two worker processes) against the
real PostgreSQL store: the same benchmark as the local runner, and a worker SIGKILLed mid-stage loses,
duplicates and pays for nothing twice."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
from collections import Counter

import pytest
import sqlalchemy as sa

from benchsmith.settings import SettingsError, load_settings
from benchsmith.store import Store
from benchsmith.store.schema import llm_calls
from tests.conftest import fresh_database
from tests.generators.test_reproducible import siblings_that_compete
from tests.generators.test_resume import key_of, two_questions
from tests.generators.test_stage import add_oracle
from tests.publish.conftest import build_reviewed
from tests.support.openai_server import ScriptedOpenAI, error, jittered

# prefect-dask and prefect-ray come with `make install-dev` (the `distributed` extra). 200 scenes, a local
# and a sharded build: ~320 s on the 2-core box. At 6 scenes the sharded build agreed while at 200 it did
# not, so CI runs the full size; BENCHSMITH_TEST_DISTRIBUTED_SCENES=6 makes a quick local check.
SCENES = int(os.environ.get("BENCHSMITH_TEST_DISTRIBUTED_SCENES", "200"))
# Ray (prefect-ray 0.6.0, ray 2.60.0) takes ~9 s to start here; its smoke build uses fewer scenes still.
RAY_SCENES = 3
# LLM answers arriving in a jittered order: a few scenes are enough for an image's siblings to compete.
LLM_SCENES = 6


def settings_for(tmp_path, name: str, db_url: str, env_extra: dict | None = None, **over: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "OPENAI"))} | (env_extra or {})
    env |= {"BENCHSMITH_WORKSPACE": str(tmp_path / name), "BENCHSMITH_DB_URL": db_url,
            **{f"BENCHSMITH__{k.upper()}": v for k, v in over.items()}}
    return load_settings(env=env)


def benchmark_of(db_url: str) -> dict:
    with Store(db_url) as store:
        with store.engine.connect() as conn:
            verdicts = sorted(tuple(r) for r in conn.execute(sa.text(
                "SELECT id, subject_id, stage, rule, passed, reason FROM verdicts")))
        return {"items": sorted(i.id for i in store.get_items()),
                "questions": sorted((q.id, q.status, tuple(q.options), q.answer) for q in store.get_questions()),
                "verdicts": verdicts}


def files_of(folder) -> dict[str, str]:
    """Every file under `folder` by its path, as the hash of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def cached_images(settings) -> list:
    return [p for p in (settings.cache_dir / "publish").rglob("*") if p.is_file()]


@pytest.fixture
def second_postgres(postgres_admin_url):
    yield from fresh_database(postgres_admin_url)


def test_a_multi_worker_runner_refuses_sqlite_in_one_line(tmp_path):
    with pytest.raises(SettingsError, match="PostgreSQL") as raised:
        settings_for(tmp_path, "ws", f"sqlite:///{tmp_path / 'b.db'}", prefect__task_runner="dask")
    assert "\n" not in str(raised.value)


@pytest.mark.slow(seconds=560)
@pytest.mark.timeout(1800)  # two 200-scene builds: ~360 s alone, more beside another test worker
def test_build_on_two_dask_workers_makes_the_same_benchmark_as_the_local_runner(
        prefect_api, tmp_path, postgres_url, second_postgres):
    from flows.build import run_build

    local = settings_for(tmp_path, "local", postgres_url)
    sharded = settings_for(tmp_path, "dask", second_postgres, prefect__task_runner="dask",
                           prefect__dask__workers="2")
    run_build(local, [], scenes=SCENES, scenes_seed=3)
    summary = run_build(sharded, [], scenes=SCENES, scenes_seed=3)

    assert summary["extract"]["extract rapidocr"]["shards"] > 1  # the work really was split
    assert summary["filter"]["shards"] > 1
    expected, got = benchmark_of(postgres_url), benchmark_of(second_postgres)
    assert len(expected["items"]) == SCENES and expected["questions"] and expected["verdicts"]
    assert got == expected


def test_llm_questions_on_two_dask_workers_are_the_same_benchmark_as_on_the_local_runner(
        prefect_api, tmp_path, postgres_url, second_postgres, oracle_dir):
    """The same answers, arriving in another order (each server's latency jitters with its own seed) and
    split over shards, give the same questions, statuses, answer letters and blind verdicts."""
    from flows.filter import filter_flow
    from flows.generate import generate_flow
    from flows.tasks import on_task_runner

    over = {"generate__generators": "[programmatic, llm]", "generate__quality__max_per_item": "20"}
    results = []
    for name, db_url, seed, runner in (("local", postgres_url, 1, {}), ("dask", second_postgres, 2, {
            "prefect__task_runner": "dask", "prefect__dask__workers": "2"})):
        with Store(db_url) as store:
            add_oracle(store, oracle_dir, LLM_SCENES)
        with ScriptedOpenAI(jittered(siblings_that_compete, base_s=0.1, jitter_s=0.4, seed=seed)) as server:
            settings = settings_for(tmp_path, name, db_url, {"OPENAI_BASE_URL": server.base_url,
                                                             "OPENAI_API_KEY": "sk-test"}, **over, **runner)
            results.append(on_task_runner(generate_flow, settings)(settings))
            on_task_runner(filter_flow, settings)(settings)

    assert results[1]["generate llm"]["shards"] > 1
    expected = benchmark_of(postgres_url)
    rules = {rule for _id, _subject, _stage, rule, _passed, _reason in expected["verdicts"]}
    assert {"near_duplicate", "per_item_cap", "mmstar"} <= rules  # the image's siblings did compete
    assert benchmark_of(second_postgres) == expected


def test_shards_are_sized_from_the_cluster_at_the_scheduler_address(tmp_path, postgres_url):
    from distributed import LocalCluster

    from flows.tasks import shard_count

    with LocalCluster(n_workers=3, threads_per_worker=2, processes=False, dashboard_address=None) as cluster:
        settings = settings_for(tmp_path, "ws", postgres_url, prefect__task_runner="dask",
                                prefect__dask__address=cluster.scheduler_address)
        assert shard_count(settings) == 2 * 3 * 2  # not twice `prefect.dask.workers`, the LocalCluster's size


def test_a_worker_killed_mid_stage_loses_nothing_duplicates_nothing_and_repays_at_most_its_call_in_flight(
        prefect_api, tmp_path, postgres_url, oracle_dir):
    from distributed import Client, LocalCluster

    from flows.generate import generate_flow
    from flows.tasks import on_task_runner

    with Store(postgres_url) as store:
        add_oracle(store, oracle_dir, 8)
    jobs = 8 * 9
    killed: list[int] = []
    paid: list[str] = []
    lock = threading.Lock()

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster, Client(cluster) as client:
        pids = list(client.run(os.getpid).values())

        def responder(body: dict):
            with lock:
                if not killed and server.calls >= jobs // 3:
                    victim = pids[0]
                    killed.append(victim)
                    os.kill(victim, signal.SIGKILL)  # whichever shard it held is lost mid-stage
                    return error(503, "worker gone")  # a failed call is not paid for
                paid.append(key_of(body))
            return two_questions(body)

        with ScriptedOpenAI(responder) as server:
            settings = settings_for(tmp_path, "ws", postgres_url,
                                    {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"},
                                    prefect__task_runner="dask",
                                    prefect__dask__address=cluster.scheduler_address,
                                    generate__generators="[llm]", generate__llm__options__concurrency="1",
                                    generate__llm__batch_size="4", generate__llm__options__backoff_s="0.05")
            result = on_task_runner(generate_flow, settings)(settings)

    assert killed, "the worker was never killed: the test did not exercise a loss"
    assert result["generate llm"]["shards"] > 1
    # A call the server answered in the instant its worker died, before the answer reached the call cache,
    # is paid again by the shard's rerun: nothing can store an answer a dead process never received. With
    # one thread and one call in flight per worker that is at most one call; every other is paid once.
    repaid = [k for k, n in Counter(paid).items() if n > 1]
    assert len(repaid) <= 1 and all(Counter(paid)[k] == 2 for k in repaid)
    with Store(postgres_url) as store:
        with store.engine.connect() as conn:
            ok = set(conn.scalars(sa.select(llm_calls.c.key).where(llm_calls.c.status == "ok")))
        questions = store.get_questions()
        done = store.ledger_rows("generate:llm")
    assert set(paid) == ok  # every paid answer is in the call cache, none lost
    assert len({q.id for q in questions}) == len(questions) == 2 * jobs  # nothing lost, nothing twice
    assert len(done) == jobs and {r["status"] for r in done} == {"done"}


def test_publish_encodes_images_on_two_dask_workers_into_the_same_release_as_the_local_runner(
        prefect_api, tmp_path, postgres_url, second_postgres, oracle_dir):
    from flows.publish import images_shard, publish_flow
    from flows.tasks import on_task_runner

    local = settings_for(tmp_path, "local", postgres_url, publish__version="v1")
    sharded = settings_for(tmp_path, "dask", second_postgres, publish__version="v1", prefect__task_runner="dask",
                           prefect__dask__workers="2")
    for settings in (local, sharded):
        with Store(settings.db_url) as store:
            build_reviewed(store, settings, oracle_dir, settings.workspace.parent / f"{settings.workspace.name}-in")
    expected = publish_flow(local)
    got = on_task_runner(publish_flow, sharded)(sharded)

    assert "publish images" not in expected  # the local runner publishes as it always has
    encoded_locally = cached_images(local)
    images = got["publish images"]
    assert images["shards"] > 1 and images["unreadable"] == 0
    assert images["encoded"] == len(encoded_locally) > 0  # every image the release shows, encoded by the workers
    assert len(cached_images(sharded)) == len(encoded_locally)  # the release encoded none again
    release, release_local = got["publish"], expected["publish"]
    assert {k: v for k, v in release.items() if k != "folder"} == {
        k: v for k, v in release_local.items() if k != "folder"}
    published = files_of(sharded.workspace / "releases" / "v1")
    assert any(path.endswith(".parquet") for path in published)
    assert published == files_of(local.workspace / "releases" / "v1")  # rows, image bytes, shards, card: all equal

    with Store(sharded.db_url) as store:  # a shard run again finds its images encoded and adds nothing
        again = images_shard(store, None, settings=sharded)
    assert again == {"encoded": 0, "reused": images["encoded"], "unreadable": 0}
    assert len(cached_images(sharded)) == len(encoded_locally)


def test_build_on_a_local_ray_makes_the_same_benchmark_as_the_local_runner(
        prefect_api, tmp_path, postgres_url, second_postgres):
    import ray

    from flows.build import run_build

    local = settings_for(tmp_path, "local", postgres_url)
    sharded = settings_for(tmp_path, "ray", second_postgres, prefect__task_runner="ray", prefect__shards="2")
    run_build(local, [], scenes=RAY_SCENES, scenes_seed=5)
    # A small Ray of its own, which the task runner joins: two CPUs, a 200 MB object store (in /dev/shm).
    ray.init(num_cpus=2, object_store_memory=200 * 1024**2, include_dashboard=False, log_to_driver=False)
    try:
        summary = run_build(sharded, [], scenes=RAY_SCENES, scenes_seed=5)
    finally:
        ray.shutdown()

    assert summary["extract"]["extract rapidocr"]["shards"] == 2 and summary["filter"]["shards"] == 2
    expected = benchmark_of(postgres_url)
    assert len(expected["items"]) == RAY_SCENES and expected["questions"] and expected["verdicts"]
    assert benchmark_of(second_postgres) == expected
