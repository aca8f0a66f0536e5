"""Calls to any OpenAI-compatible chat endpoint: concurrent, rate limited, retried, cached and costed.

Every stage that talks to an LLM goes through `LlmClient.run`: many `LlmRequest`s in, one `LlmResult` per
request out, in order. It never raises for one bad call: a call that still fails after its retries, or
whose output is not the JSON asked for, comes back with `ok=False`, a reason and the raw text.

A request's key hashes its model, messages and parameters. A call that succeeded is stored in the
`llm_calls` table under that key as soon as it returns, so a rerun, or a run resumed after a crash, reads
it back and sends nothing; a call that failed at the HTTP level is recorded too, but tried again. Two
processes on one store split the work rather than pay twice: a client claims its calls first
(`Store.claim_llm_calls`, status 'in_flight'), waits for the calls another process claimed and reads
their answers back, and takes over the claim of a process that is gone (on this machine) or older than
`deadline_s` plus a margin (elsewhere).

Rate limits (`requests_per_minute`, `tokens_per_minute`) are token buckets per endpoint and model; with a
store, a row of it taken from in one short transaction, so they hold across every process on that store.
Retries are ours (the openai client's are off), so every wait stays inside the concurrency slot and the
rate limiter: 429, 5xx, timeouts, dropped connections and replies that are not a chat completion (a
proxy's HTML page) are retried up to `max_retries` times, after the server's Retry-After or an exponential
backoff. `deadline_s` bounds a whole call, retries and waits included, since `timeout_s` bounds only each
read and a server can trickle a byte at a time for ever.

In `mode: batch` a request with no stored answer is not sent: it is queued for a batch job
(`benchsmith.llm_batch`) and comes back with `ok=False` and WAITING_FOR_BATCH, so its work waits for a
later run. A request in a batch job ('in_batch' in the store) is never sent again until the job is
collected.

The API key comes only from `settings.secrets.openai_api_key` and never enters a request record, a cache
row, a log line or an error message: every error text is scrubbed of known secrets (`benchsmith.secrets`),
as providers echo the key back in their 401 messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import random
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

import jsonschema
from pydantic import BaseModel, Field

if TYPE_CHECKING:
    import openai

from benchsmith import runner
from benchsmith.llm_batch import QUEUED, submit_queued
from benchsmith.llm_requests import (BATCH_LINE_FAILED, LlmError, LlmRequest, NotAChatCompletion, Price, answered,
                                     describe, openai_sdk, owner_gone, rate_bucket)
from benchsmith.secrets import remember, scrub
from benchsmith.settings import Settings, Strict
from benchsmith.store.llm_batches import IN_BATCH

CLAIM_POLL_S = 0.5       # how often a client looks for calls another process has in flight
CLAIM_MARGIN_S = 60.0    # a claim older than deadline_s + this was left by a process that died
WAITING_FOR_BATCH = "waiting for an LLM batch job: `benchsmith llm batches collect` stores its answers"


class BatchOptions(Strict):
    """How requests go out in `batch` mode (benchsmith.llm_batch): the provider's limits per input file
    and on tokens queued at once, and what becomes of a request whose batch line failed."""

    max_requests_per_file: int = Field(50_000, ge=1)
    max_file_bytes: int = Field(190_000_000, ge=1_000)   # the OpenAI limit is 200 MB
    enqueued_tokens: int = Field(0, ge=0)                # per model, all unfinished jobs; 0: no limit
    completion_window: str = "24h"
    failed_lines: Literal["batch", "live"] = "batch"     # ask again in the next batch, or live at once


class LlmOptions(Strict):
    """How a stage calls its LLM. Each stage embeds one of these in its own settings section."""

    concurrency: int = Field(8, ge=1)              # requests in flight at once
    requests_per_minute: float = Field(0, ge=0)    # 0: no limit
    tokens_per_minute: float = Field(0, ge=0)      # 0: no limit; counts prompt estimate + max_tokens
    max_retries: int = Field(4, ge=0)              # on 429, 5xx, timeouts, dropped connections
    timeout_s: float = Field(60, gt=0)             # per HTTP read
    deadline_s: float = Field(300, gt=0)           # per call, all attempts and waits included
    backoff_s: float = Field(1.0, ge=0)            # first wait when the server gives no Retry-After
    max_retry_after_s: float = Field(120, ge=0)    # never wait longer than this for one retry
    prices: dict[str, Price] = Field(default_factory=dict)  # model name -> price; unknown models cost 0
    mode: Literal["live", "batch"] = "live"        # batch: requests wait for a batch job at half price
    batch: BatchOptions = Field(default_factory=BatchOptions)


class LlmResult(BaseModel):
    """What one request produced. `ok=False` carries `reason` and whatever raw text came back."""

    key: str
    ok: bool
    content: str = ""
    parsed: Any = None               # the JSON value when the request asked for JSON output
    reason: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    logprobs: list[dict[str, Any]] | None = None
    cached: bool = False
    attempts: int = 0
    seconds: float = 0.0


class CallTally:
    """What one stage's LLM calls came to in a run (requests, cache hits, tokens, cost), and the HTTP
    failures it left for the next run."""

    def __init__(self) -> None:
        self.stats: Counter = Counter()
        self.http_failures: Counter = Counter()

    def count(self, result: LlmResult) -> bool:
        """Count one finished call; False when it got no answer at all (an HTTP failure after the retries),
        so the work that needed it waits for a later run."""
        self.stats.update({"llm_requests": 1, "llm_cached": int(result.cached), "tokens_in": result.tokens_in,
                           "tokens_out": result.tokens_out})
        self.stats["cost_usd"] += result.cost_usd
        if not result.ok and not result.content:
            self.http_failures[result.reason] += 1
            return False
        return True


def check_output(request: LlmRequest, content: str) -> tuple[Any, str]:
    """Parse and validate the content against what the request asked for: (value, '') or (None, reason)."""
    fmt = request.response_format or {}
    if fmt.get("type") not in ("json_schema", "json_object"):
        return None, ""
    try:
        value = json.loads(content)
    except (json.JSONDecodeError, TypeError) as exc:
        return None, f"invalid JSON: {exc}"
    schema = (fmt.get("json_schema") or {}).get("schema")
    if schema is not None:
        problem = jsonschema.exceptions.best_match(_validator(json.dumps(schema, sort_keys=True)).iter_errors(value))
        if problem is not None:
            where = "/".join(str(p) for p in problem.absolute_path) or "(root)"
            return None, f"schema violation at {where}: {problem.message}"
    elif not isinstance(value, dict):
        return None, "JSON output is not an object"
    return value, ""


@lru_cache(maxsize=64)
def _validator(schema_json: str):
    """Checking a schema is far dearer than using it: build each validator once."""
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def result_of(request: LlmRequest, row: dict[str, Any], **timing: Any) -> LlmResult:
    """What a call-cache row holds for `request`: its answer checked against the output asked for, or
    why the call failed."""
    if row["status"] != "ok":
        return LlmResult(key=row["key"], ok=False, reason=row["error"], **timing)
    response = row["response"] or {}
    content = response.get("content", "")
    parsed, problem = check_output(request, content)
    return LlmResult(key=row["key"], ok=not problem, content=content, parsed=parsed, reason=problem,
                     tokens_in=row["tokens_in"], tokens_out=row["tokens_out"], cost_usd=row["cost_usd"],
                     logprobs=response.get("logprobs"), **timing)


def take_from_bucket(levels: dict[str, float], elapsed_s: float, limits: dict[str, float],
                     want: dict[str, float]) -> tuple[dict[str, float], float]:
    """One look at a token bucket per limit (capacity: one minute's budget; 0: unlimited, left alone):
    refill `levels` for `elapsed_s`, then take `want` if the bucket holds it. Returns the new levels and 0,
    or the refilled levels and the seconds until it will hold `want`; a want over a minute's budget waits
    for a full bucket, then goes."""
    levels = {name: min(limit, levels[name] + elapsed_s * limit / 60) if limit else levels[name]
              for name, limit in limits.items()}
    waits = [(min(want[name], limit) - levels[name]) * 60 / limit for name, limit in limits.items() if limit]
    if max(waits, default=0.0) > 0:
        return levels, max(waits)
    return {name: levels[name] - want[name] if limit else levels[name] for name, limit in limits.items()}, 0.0


class RateLimiter:
    """Requests and tokens per minute for one endpoint and model, as token buckets that refill continuously.
    With a store the buckets are a row of it (`bucket` names it), shared by every process on that store:
    each take is one short store transaction. Without one, they live in this limiter. Calls in this
    process go first come, first served."""

    def __init__(self, requests_per_minute: float, tokens_per_minute: float, store=None, bucket: str = "") -> None:
        self._limits = {"requests": requests_per_minute, "tokens": tokens_per_minute}
        self._store = store
        self._bucket = bucket
        self._levels = dict(self._limits)  # in-process buckets start full, as a new store row does
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    @property
    def limits_anything(self) -> bool:
        return any(self._limits.values())

    async def acquire(self, tokens: int) -> None:
        if not self.limits_anything:
            return
        want = {"requests": 1.0, "tokens": float(tokens)}
        async with self._lock:
            while (wait := await self._take(want)) > 0:
                await asyncio.sleep(wait)

    async def _take(self, want: dict[str, float]) -> float:
        if self._store is not None:  # in a thread, like the client's store writes: other calls run meanwhile
            return await asyncio.to_thread(self._store.update_rate_bucket, self._bucket,
                                           lambda levels, elapsed: take_from_bucket(levels, elapsed,
                                                                                    self._limits, want))
        now = time.monotonic()
        self._levels, wait = take_from_bucket(self._levels, now - self._stamp, self._limits, want)
        self._stamp = now
        return wait


class LlmClient:
    """Runs batches of chat requests against the endpoint in `settings.services.openai_base_url`."""

    def __init__(self, settings: Settings, options: LlmOptions, store=None) -> None:
        self.base_url = settings.services.openai_base_url or None
        secret = settings.secrets.openai_api_key
        self._api_key = secret.get_secret_value() if secret else None
        remember(self._api_key)
        self.options = options
        self.store = store
        self.http_calls = 0  # requests actually sent, retries included
        self.owner = f"in flight: {socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"  # of its claims
        self.queued: dict[str, LlmRequest] = {}  # batch mode: key -> request, until the stage submits them

    def api_key(self) -> str:
        """The key to send: local OpenAI-compatible servers accept any, but the openai client wants one."""
        if self._api_key:
            return self._api_key
        if self.base_url is None:
            raise LlmError("OPENAI_API_KEY is not set; set it, or point OPENAI_BASE_URL (services.openai_base_url) "
                           "at a local OpenAI-compatible server")
        return "not-needed"

    def run(self, requests: Sequence[LlmRequest],
            on_result: Callable[[LlmRequest, LlmResult], None] | None = None) -> list[LlmResult]:
        """One result per request, in order. `on_result` sees each result as it arrives (cached ones first).
        Requests with the same key are sent once and all get its result."""
        return asyncio.run(self._gather(requests, on_result))

    async def _gather(self, requests: Sequence[LlmRequest],
                      on_result: Callable[[LlmRequest, LlmResult], None] | None) -> list[LlmResult]:
        results: list[LlmResult | None] = [None] * len(requests)
        keys = [request.key for request in requests]  # hashed once: each costs a JSON dump of the messages
        copies: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            copies.setdefault(key, []).append(index)

        def deliver(index: int, result: LlmResult) -> None:
            for same in copies[keys[index]]:
                results[same] = result
                if on_result:
                    on_result(requests[same], result)

        todo: list[int] = []
        stored = self.store.get_llm_calls(list(copies)) if self.store is not None else {}
        for key, (index, *_same) in copies.items():
            row = stored.get(key)
            hit = self._cached(requests[index], row)
            if hit is None and row is not None and row["status"] == IN_BATCH:
                hit = LlmResult(key=key, ok=False, reason=WAITING_FOR_BATCH)  # never sent twice
            if hit is None and self.options.mode == "batch" and not self._retry_live(row):
                hit = self._queue(requests[index], key)
            if hit is None:
                todo.append(index)
            else:
                deliver(index, hit)
        if todo:
            api_key = self.api_key()  # only now: a fully cached rerun needs no key
            # claim the calls (store writes, in a thread) while openai is imported here (~0.5 s)
            claiming = asyncio.ensure_future(asyncio.to_thread(self._claim, {keys[i]: requests[i] for i in todo},
                                                               stored))
            await asyncio.sleep(0)
            openai = openai_sdk()

            semaphore = asyncio.Semaphore(self.options.concurrency)
            limiters = {model: RateLimiter(self.options.requests_per_minute, self.options.tokens_per_minute,
                                           self.store, rate_bucket(self.base_url, model))
                        for model in {requests[index].model for index in todo}}
            async with openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key, max_retries=0,
                                          timeout=self.options.timeout_s) as client:
                recorder = _Recorder(self.store)

                async def one(index: int) -> None:
                    request = requests[index]
                    started = time.monotonic()
                    try:
                        async with semaphore:
                            started = time.monotonic()  # the call's own time, not its wait for a slot
                            response, reason, attempts = await self._call(client, limiters[request.model], request)
                    except Exception as exc:  # noqa: BLE001 - one bad call must not cancel the others in flight
                        response, reason, attempts = None, describe(exc), 1
                    # stored after the slot is given back: the next call goes out while this one is written
                    row = self._row(request, keys[index], response, reason, time.monotonic() - started)
                    await recorder.record(row)
                    deliver(index, result_of(request, row, attempts=attempts, seconds=row["seconds"]))

                mine = await claiming
                await asyncio.gather(*(one(index) for index in todo if keys[index] in mine),
                                     self._await_others([i for i in todo if keys[i] not in mine],
                                                        requests, keys, one, deliver))
        return results  # type: ignore[return-value]

    def _queue(self, request: LlmRequest, key: str) -> LlmResult:
        """Keep `request` for the batch job this process submits when its stage ends its run
        (`benchsmith.llm_batch.submit_queued`); its work waits for a later run, as after a failed call."""
        if self.store is None:
            raise LlmError("llm.options.mode batch needs a store to record its batch jobs in")
        if not self.queued:
            QUEUED.append(self)
            if submit_queued not in runner.AT_RUN_END:
                runner.AT_RUN_END.append(submit_queued)
        self.queued[key] = request
        return LlmResult(key=key, ok=False, reason=WAITING_FOR_BATCH)

    def _retry_live(self, row: dict | None) -> bool:
        """Whether a call whose batch line failed is to be asked again live (`batch.failed_lines`)."""
        return (self.options.batch.failed_lines == "live" and row is not None and row["status"] == "error"
                and row["error"].startswith(BATCH_LINE_FAILED))

    def _claim(self, calls: dict[str, LlmRequest], stored: dict[str, dict]) -> set[str]:
        """The keys of `calls` (key -> request) this client may send now."""
        if self.store is None:
            return set(calls)
        rows = [{"key": key, "purpose": r.purpose, "model": r.model, "request": r.stored()} for key, r in calls.items()]
        dead = {row["error"] for row in stored.values() if row["status"] == "in_flight" and owner_gone(row["error"])}
        return self.store.claim_llm_calls(rows, self.owner, self.options.deadline_s + CLAIM_MARGIN_S, sorted(dead))

    async def _await_others(self, waiting: list[int], requests: Sequence[LlmRequest], keys: Sequence[str],
                            one: Callable, deliver: Callable[[int, LlmResult], None]) -> None:
        """Wait for the calls another process claimed: read back its answers, and take over the claims
        it left behind when it died (or whose call failed there, as a rerun here would retry them)."""
        while waiting:
            await asyncio.sleep(CLAIM_POLL_S)
            rows = await asyncio.to_thread(self.store.get_llm_calls, [keys[i] for i in waiting])
            still: list[int] = []
            for index in waiting:
                if (hit := self._cached(requests[index], rows.get(keys[index]))) is None:
                    still.append(index)
                else:
                    deliver(index, hit)
            taken = (await asyncio.to_thread(self._claim, {keys[i]: requests[i] for i in still}, rows)
                     if still else set())
            await asyncio.gather(*(one(index) for index in still if keys[index] in taken))
            waiting = [index for index in still if keys[index] not in taken]

    @staticmethod
    def _cached(request: LlmRequest, row: dict | None) -> LlmResult | None:
        """The stored answer to `request`, if a call for it succeeded before."""
        return result_of(request, row, cached=True) if row is not None and row["status"] == "ok" else None

    async def _call(self, client: openai.AsyncOpenAI, limiter: RateLimiter,
                    request: LlmRequest) -> tuple[dict[str, Any] | None, str, int]:
        """The HTTP exchange, retries and waits included, within `deadline_s`: (the chat completion, "",
        attempts), or (None, why it failed, attempts)."""
        openai = openai_sdk()
        # a reply that is not a chat completion at all (a proxy's HTML page, a cut-off body) is retried too:
        # it is the transport failing, not the model answering badly
        retryable = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                     openai.APIConnectionError, openai.APIResponseValidationError, json.JSONDecodeError,
                     NotAChatCompletion)
        attempts = 0

        async def answer() -> tuple[dict[str, Any] | None, str]:
            nonlocal attempts
            while True:
                attempts += 1
                if limiter.limits_anything:  # else skip the token estimate: a JSON dump of the messages
                    await limiter.acquire(request.estimated_tokens())
                try:
                    self.http_calls += 1
                    return await self._attempt(client, request), ""
                except retryable as exc:
                    if attempts > self.options.max_retries:
                        return None, describe(exc)
                    # the server's Retry-After, else a backoff jittered so that clients that failed together part
                    try:
                        wait = max(0.0, float(exc.response.headers.get("retry-after")
                                              if isinstance(exc, openai.APIStatusError) else None))
                    except (TypeError, ValueError):
                        wait = self.options.backoff_s * 2 ** (attempts - 1) * random.uniform(0.5, 1.5)
                    await asyncio.sleep(min(wait, self.options.max_retry_after_s))
                except openai.APIStatusError as exc:  # 400, 401, 404...: asking again will not help
                    return None, describe(exc)

        try:
            return *await asyncio.wait_for(answer(), self.options.deadline_s), attempts
        except TimeoutError:
            return None, (f"no answer within llm deadline_s ({self.options.deadline_s:g} s) "
                          f"after {attempts} attempt(s)"), attempts

    async def _attempt(self, client: openai.AsyncOpenAI, request: LlmRequest) -> dict[str, Any]:
        """The chat completion, as the JSON object the server sent. The request body goes out as we built
        it (`client.post`, the SDK's way to an endpoint as is): the typed `chat.completions.create` walks
        every message through its parameter types first, ~2 ms of CPU per call that holds up the others."""
        import httpx

        raw = await client.post("/chat/completions", cast_to=httpx.Response,
                                body={"model": request.model, "messages": request.messages, **request.params()})
        kind = raw.headers.get("content-type", "")
        body = json.loads(raw.content) if "json" in kind else None  # a cut-off body: JSONDecodeError, retried
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
            raise NotAChatCompletion(f"HTTP {raw.status_code} with a {kind or 'no content-type'} body, not a chat "
                                     f"completion: {raw.text[:120]!r}")
        return body

    def _row(self, request: LlmRequest, key: str, response: dict[str, Any] | None, reason: str,
             seconds: float) -> dict[str, Any]:
        """A finished call's row in the store's `llm_calls` table: its chat completion, or why it failed."""
        row = {"key": key, "purpose": request.purpose, "model": request.model, "request": request.stored(),
               "seconds": seconds}
        if response is None:
            return row | {"status": "error", "response": None, "error": scrub(reason), "tokens_in": 0,
                          "tokens_out": 0, "cost_usd": 0.0}
        return row | answered(response, self.options.prices.get(request.model) or Price())


class _Recorder:
    """Stores finished calls' rows in batches: the rows that come while one batch is being written go into
    the next, in one transaction on a worker thread. A call's result is handed on only once it is stored,
    so a call paid for is in the cache before anything is built from it."""

    def __init__(self, store) -> None:
        self.store = store
        self.waiting: list[tuple[dict, asyncio.Future]] = []
        self.writing: asyncio.Future | None = None

    async def record(self, row: dict[str, Any]) -> None:
        if self.store is None:
            return
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((row, future))
        if self.writing is None:
            self.writing = asyncio.ensure_future(self._write())
        await future

    async def _write(self) -> None:
        try:
            while self.waiting:
                batch, self.waiting = self.waiting, []
                try:
                    await asyncio.to_thread(self.store.put_llm_calls, [row for row, _ in batch])
                except Exception as exc:  # noqa: BLE001 - every call of the batch sees why it was not stored
                    for _, future in batch:
                        if not future.done():  # a caller cancelled meanwhile: nobody waits for it
                            future.set_exception(exc)
                    continue
                for _, future in batch:
                    if not future.done():
                        future.set_result(None)
        finally:
            self.writing = None


def stream(client: LlmClient, requests: Sequence[LlmRequest]) -> Iterator[tuple[int, LlmResult]]:
    """(index, result) for each request as its answer arrives, while the rest stay in flight; the calls
    run on an event loop in a worker thread, so the caller can store results meanwhile."""
    if not requests:
        return
    arrived: queue.Queue = queue.Queue()
    index_of = {id(r): i for i, r in enumerate(requests)}
    failure: list[BaseException] = []

    def work() -> None:
        try:
            client.run(requests, on_result=lambda request, result: arrived.put((index_of[id(request)], result)))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            failure.append(exc)
        finally:
            arrived.put(None)

    worker = threading.Thread(target=work, name="llm-calls", daemon=True)
    worker.start()
    while (item := arrived.get()) is not None:
        yield item
    worker.join()
    if failure:
        raise failure[0]
