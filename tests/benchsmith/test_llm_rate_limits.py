"""LLM rate limits held by the store: separate processes take from one token bucket per endpoint and model,
on SQLite and on a real PostgreSQL, directly and through LlmClient against the scripted OpenAI server."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import time

import pytest
import sqlalchemy as sa

from benchsmith.llm import LlmClient, LlmOptions, LlmRequest, RateLimiter, rate_bucket
from benchsmith.settings import load_settings
from benchsmith.store import Store
from benchsmith.store.schema import rate_buckets
from tests.support.openai_server import ScriptedOpenAI, json_completion

PROCESSES = 3
WINDOW_S = 3.0
# New processes, sharing nothing but the store, forked from a server that has imported this module (and
# openai) once, rather than each importing them again: the tests spend their time taking, not starting.
processes = multiprocessing.get_context("forkserver")
processes.set_forkserver_preload([__name__, "openai"])


def take_for_a_while(url: str, limits: tuple[float, float], wants: list[int], barrier, results) -> None:
    """One process: after the barrier, take `wants` tokens at a time (cycling) from the bucket for WINDOW_S
    seconds; report (wall time granted, tokens) per take."""
    async def takes(limiter: RateLimiter, until: float) -> list[tuple[float, int]]:
        granted = []
        while time.time() < until:
            want = wants[len(granted) % len(wants)]
            await limiter.acquire(want)
            granted.append((time.time(), want))
        return granted

    with Store(url) as store:
        limiter = RateLimiter(*limits, store=store, bucket="http://provider/v1 m")
        barrier.wait(), barrier.wait()
        released = time.time()
        results.put((released, asyncio.run(takes(limiter, released + WINDOW_S))))


def run_processes(target, *args, count: int = PROCESSES, when_ready=lambda: None) -> list:
    """Run `target` in `count` new processes, which wait at the barrier (twice) once ready; `when_ready`
    runs in between, once they all are. Returns what each put on the results queue."""
    barrier, results = processes.Barrier(count + 1, timeout=60), processes.Queue()
    workers = [processes.Process(target=target, args=(*args, barrier, results)) for _ in range(count)]
    for worker in workers:
        worker.start()
    barrier.wait()
    when_ready()
    barrier.wait()
    gathered = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    return gathered


def within_the_budget(grants: list[tuple[float, int]], capacity: float, per_s: float, since: float) -> None:
    """Every prefix of the grants, in time order, fits what the bucket held at `since` plus its refill."""
    total = 0
    for at, amount in sorted(grants):
        total += amount
        assert total <= capacity + per_s * (at - since) + 1e-6, f"{total} granted {at - since:.3f} s in"


def test_processes_share_one_requests_bucket(store_url):
    Store(store_url).close()  # migrated once, before the processes race to open it
    reports = run_processes(take_for_a_while, store_url, (120.0, 0.0), [1])  # 120 at once, then 2 a second
    per_process = [grants for _released, grants in reports]
    grants = [grant for process in per_process for grant in process]
    assert all(process for process in per_process)  # every process got some
    # the bucket's first take was after the first process was released from the barrier
    within_the_budget(grants, capacity=120, per_s=2.0, since=min(released for released, _ in reports))
    # ...and the budget is used: the full bucket at the first take, then its refill until the window ends
    first, ends = min(at for at, _ in grants), min(max(at for at, _ in process) for process in per_process)
    assert sum(1 for at, _ in grants if at <= ends) >= 120 + 2.0 * (ends - first) - 2


def drain(url: str, bucket: str) -> float:
    """Empty `bucket`; returns a time before it was emptied: from there on, only its refill can be taken."""
    with Store(url) as store:
        before = time.time()
        store.update_rate_bucket(bucket, lambda _levels, _elapsed: ({"requests": 0.0, "tokens": 0.0}, None))
    return before


def test_processes_share_one_tokens_bucket(store_url):
    Store(store_url).close()
    drained: list[float] = []
    wants = [random.Random(seed).randint(1, 6) for seed in range(20)]
    per_process = [grants for _released, grants in run_processes(
        take_for_a_while, store_url, (0.0, 1800.0), wants,  # 30 tokens a second
        when_ready=lambda: drained.append(drain(store_url, "http://provider/v1 m")))]
    grants = [grant for process in per_process for grant in process]
    within_the_budget(grants, capacity=0, per_s=30.0, since=drained[0])
    # all of it is used: at most one take's worth is left in the bucket (and the few ms a take lasts)
    ends = min(max(at for at, _ in process) for process in per_process)
    assert sum(amount for at, amount in grants if at <= ends) >= 30.0 * (ends - drained[0]) - max(wants) - 3


def test_a_take_over_a_minutes_budget_waits_for_a_full_bucket_and_the_next_one_pays_for_it(store):
    async def scenario():
        limiter = RateLimiter(0, 6000, store=store, bucket="http://provider/v1 m")  # 100 tokens a second
        started = time.monotonic()
        await limiter.acquire(6030)  # the bucket is full: it goes, and leaves the bucket 30 short
        first = time.monotonic() - started
        await limiter.acquire(30)  # waits for 60 tokens of refill
        return first, time.monotonic() - started

    first, both = asyncio.run(scenario())
    assert first < 0.3
    assert 0.59 <= both < 1.2  # SQLite's clock counts whole milliseconds


def test_an_unlimited_client_touches_no_bucket(store):
    asyncio.run(RateLimiter(0, 0, store=store, bucket="http://provider/v1 m").acquire(10_000))
    asyncio.run(RateLimiter(60, 0, store=store, bucket="http://provider/v1 other").acquire(10_000))
    with store.engine.connect() as conn:
        assert conn.scalars(sa.select(rate_buckets.c.name)).all() == ["http://provider/v1 other"]


def test_the_bucket_is_the_endpoint_and_model_never_the_credentials():
    assert rate_bucket(None, "gpt-4o") == "https://api.openai.com/v1 gpt-4o"
    assert rate_bucket("http://user:sk-secret@vllm:8000/v1/?key=sk-2", "llava") == "http://vllm:8000/v1 llava"


def call_at_once(url: str, base_url: str, workspace: str, calls: int, barrier, results) -> None:
    """One process: a client on the store sends `calls` prompts of its own, all at once after the barrier."""
    settings = load_settings(env={"BENCHSMITH_WORKSPACE": workspace, "OPENAI_BASE_URL": base_url})
    prompts = [f"process {os.getpid()} question {i}" for i in range(calls)]
    options = LlmOptions(requests_per_minute=360, concurrency=4, max_retries=0)
    with Store(url) as store:
        barrier.wait(), barrier.wait()
        answers = LlmClient(settings, options, store).run(
            [LlmRequest(purpose="generate", model="m", messages=[{"role": "user", "content": p}]) for p in prompts])
    results.put([answer.ok for answer in answers])


def test_clients_in_processes_send_at_most_the_rate_between_them(store_url, tmp_path):
    arrivals: list[tuple[float, int]] = []
    with ScriptedOpenAI(lambda _request: arrivals.append((time.time(), 1)) or json_completion({})) as server:
        Store(store_url).close()
        drained: list[float] = []
        per_process = run_processes(call_at_once, store_url, server.base_url, str(tmp_path), 9, count=2,
                                    when_ready=lambda: drained.append(drain(store_url, rate_bucket(server.base_url, "m"))))
    assert server.calls == 18 and per_process == [[True] * 9] * 2
    # a request reaches the server after its take from the bucket: the arrivals fit the budget too
    within_the_budget(arrivals, capacity=0, per_s=6.0, since=drained[0])
    # and not much slower: a limiter that halved the rate would take 6 s; 2 s of slack covers two loaded cores
    assert max(at for at, _ in arrivals) - drained[0] < 18 / 6.0 + 2.0
