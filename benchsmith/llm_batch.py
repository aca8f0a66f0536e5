"""Batch jobs for LLM calls (the OpenAI Batch API format): the same answers at the provider's batch price.

In `llm.options.mode: batch` the client queues every request it has no answer for (`LlmClient._queue`),
and the work that needs it waits for a later run. When the stage ends its run, `submit_queued` writes the
requests as JSONL files (one model per file, split by `batch.max_requests_per_file` and
`batch.max_file_bytes`) and, per file: records the job and marks its requests 'in_batch' in the call cache
in one transaction, before anything is sent; uploads the file; creates the job (its metadata naming our
batch id); records the provider's ids. A request in a batch is never sent again until its job is collected.

`collect` reads the output and error files of every ended job of the configured endpoint into the call
cache, as live answers are stored (at batch prices), and closes the job 'collected'. A failed line leaves
its call failed with BATCH_LINE_FAILED (asked again in the next batch, or live: `batch.failed_lines`); a
malformed line, and a request the job never ran (expiry, cancel: absent from its files, or in its error
file as `batch_expired`/`batch_cancelled`), are counted and released for the next batch.

A process killed between recording a job and recording the provider's ids leaves it 'uploading': the next
submit or collect finds the job by its metadata, or its file by name, and goes on; only a job the provider
never got has its requests released, and costs nothing. Batch submissions take nothing from the live rate limiter;
`batch.enqueued_tokens` caps what waits in unfinished jobs. Batch files hold requests only: the API key
travels in the HTTP header, never in a file or a row.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from benchsmith.console import errors
from benchsmith.llm_requests import (BATCH_LINE_FAILED, LlmError, LlmRequest, Price, answered, describe, openai_sdk,
                                     owner_gone, rate_bucket)
from benchsmith.records import aware, utcnow
from benchsmith.secrets import scrub

if TYPE_CHECKING:  # for annotations only: the client imports this module to submit what it queued
    from benchsmith.llm import LlmClient

ENDED = ("completed", "expired", "cancelled", "failed")  # the provider's last statuses of a job
NEVER_RAN = ("batch_expired", "batch_cancelled")  # error-file codes of requests a job ended before it ran
CHAT_URL = "/v1/chat/completions"
METADATA_KEY = "benchsmith_batch"
ORPHANED_AFTER = timedelta(hours=1)  # an 'uploading' job this old was left by a process elsewhere that died
NO_BATCHES = ("the LLM endpoint {url} offers no batch jobs ({why}); set llm.options.mode to live for the stages "
              "that call it")


QUEUED: list[LlmClient] = []  # clients with requests queued for a batch job (mode: batch)


def submit_queued() -> None:
    """Submit what every client of this process queued for a batch job: the end of a stage's run."""
    while QUEUED:
        client = QUEUED.pop()
        queued, client.queued = client.queued, {}
        submit(client, list(queued.values()))


def submit(client: LlmClient, requests: Sequence[LlmRequest]) -> list[str]:
    """Send `requests` as batch jobs of `client`'s endpoint; returns the ids of the jobs recorded."""
    store, options = client.store, client.options.batch
    provider = _provider(client)
    endpoint = _endpoint(client.base_url)
    resume(client, provider)
    by_model: dict[str, list[LlmRequest]] = {}
    for request in requests:
        by_model.setdefault(request.model, []).append(request)
    submitted: list[str] = []
    for model, mine in sorted(by_model.items()):
        room = _enqueued_room(store, endpoint, model, options.enqueued_tokens)
        for part, held in batch_files(mine, options.max_requests_per_file, options.max_file_bytes, room):
            if held:
                errors.print(f"[yellow]{held} request(s) for {model} wait for room under llm.options.batch."
                             "enqueued_tokens; the next run submits them[/]")
            if part:
                submitted += _submit_file(client, provider, endpoint, model, part)
    return submitted


class Line(NamedTuple):
    """One request as a line of a batch input file."""

    request: LlmRequest
    key: str
    data: bytes
    tokens: int  # its estimate for the queue limit: prompt plus output cap


def batch_files(requests: Sequence[LlmRequest], max_requests: int, max_bytes: int,
                room: float = float("inf")) -> Iterator[tuple[list[Line], int]]:
    """`requests` as the lines of batch input files within the provider's limits: (lines, 0) per file,
    then ([], n) when n requests would pass `room` estimated tokens and wait for a later run."""
    lines: list[Line] = []
    size = 0
    for n, request in enumerate(requests):
        tokens = request.estimated_tokens()
        room -= tokens
        if room < 0:
            if lines:
                yield lines, 0
            yield [], len(requests) - n
            return
        key = request.key
        data = (json.dumps({"custom_id": key, "method": "POST", "url": CHAT_URL,
                            "body": {"model": request.model, "messages": request.messages, **request.params()}},
                           ensure_ascii=False) + "\n").encode("utf-8")
        if lines and (len(lines) >= max_requests or size + len(data) > max_bytes):
            yield lines, 0
            lines, size = [], 0
        lines.append(Line(request, key, data, tokens))
        size += len(data)
    if lines:
        yield lines, 0


def _submit_file(client: LlmClient, provider, endpoint: str, model: str, lines: list[Line]) -> list[str]:
    price = client.options.prices.get(model) or Price()
    live = sum(price.cost(line.tokens - (line.request.max_tokens or 256), line.request.max_tokens or 256)
               for line in lines)
    batch = {"id": uuid.uuid4().hex[:24], "endpoint": endpoint, "model": model, "status": "uploading",
             "owner": client.owner, "estimated_tokens": sum(line.tokens for line in lines),
             "prices": {"input_per_mtok": price.input_per_mtok, "output_per_mtok": price.output_per_mtok,
                        "batch_factor": price.batch_factor},
             "live_cost_usd": live, "cost_usd": live * price.batch_factor}  # estimates until collected
    taken = client.store.start_llm_batch(batch, [{"key": line.key, "purpose": line.request.purpose, "model": model,
                                                  "request": line.request.stored()} for line in lines])
    if not taken:
        return []
    data = b"".join(line.data for line in lines if line.key in taken)
    try:
        file = provider.files.create(file=(file_name(batch["id"]), data), purpose="batch")
        client.store.update_llm_batch(batch["id"], input_file_id=file.id)
        _create_job(client, provider, batch["id"], file.id)
    except openai_sdk().NotFoundError as exc:
        _abandon(client.store, batch["id"], "its endpoint offers no batch jobs")
        raise LlmError(NO_BATCHES.format(url=client.base_url or "", why=describe(exc))) from None
    return [batch["id"]]


def file_name(batch_id: str) -> str:
    return f"benchsmith-{batch_id}.jsonl"


def _create_job(client: LlmClient, provider, batch_id: str, file_id: str) -> None:
    job = provider.batches.create(input_file_id=file_id, endpoint=CHAT_URL,
                                  completion_window=client.options.batch.completion_window,
                                  metadata={METADATA_KEY: batch_id})
    client.store.update_llm_batch(batch_id, job_id=job.id, status=job.status)


def _abandon(store, batch_id: str, why: str) -> None:
    """Close a job the provider never got: its requests are released, and it cost nothing."""
    store.finish_llm_batch(batch_id, [], f"{why}; asked again in the next batch", status="abandoned",
                           cost_usd=0.0, live_cost_usd=0.0)


def resume(client: LlmClient, provider) -> None:
    """Go on with the jobs a process that died left 'uploading': adopt the job the provider has for it
    (found by its metadata), or create it from the file already uploaded (found by name), or release
    its requests when the provider never got the file."""
    now = utcnow()
    left = [b for b in client.store.get_llm_batches(["uploading"])
            if b["endpoint"] == _endpoint(client.base_url) and b["owner"] != client.owner
            and (owner_gone(b["owner"]) or aware(b["created_at"]) < now - ORPHANED_AFTER)]
    if not left:
        return
    jobs = {(job.metadata or {}).get(METADATA_KEY): job for job in provider.batches.list(limit=100)}
    files = {file.filename: file.id for file in provider.files.list(purpose="batch")}
    for batch in left:
        if (job := jobs.get(batch["id"])) is not None:
            client.store.update_llm_batch(batch["id"], job_id=job.id, input_file_id=job.input_file_id,
                                          status=job.status, owner=client.owner)
        elif (file_id := files.get(file_name(batch["id"]))) is not None:
            client.store.update_llm_batch(batch["id"], input_file_id=file_id, owner=client.owner)
            _create_job(client, provider, batch["id"], file_id)
        else:
            _abandon(client.store, batch["id"], "its batch never reached the provider")


def collect(client: LlmClient, *, wait: bool = False, poll_s: float = 30.0, max_poll_s: float = 600.0,
            progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Store the answers of every job of `client`'s endpoint that has ended, whenever it ended (a job a
    killed process left behind may have ended before it was adopted), and close it 'collected'; with
    `wait`, poll (waits doubling from `poll_s` up to `max_poll_s`) until none is left open. `progress(answered, requests)`
    hears how far the running jobs are after each look. Returns the jobs looked at, as stored."""
    provider = _provider(client)
    resume(client, provider)
    endpoint = _endpoint(client.base_url)
    seen: set[str] = set()
    while True:
        running = [b for b in _running(client.store, endpoint) if b["job_id"]]
        answered_now = 0
        for batch in running:
            seen.add(batch["id"])
            job = provider.batches.retrieve(batch["job_id"])
            if job.status in ENDED:
                store_output(client.store, provider, batch, job)
                answered_now += batch["requests"]
            else:
                done = job.request_counts.completed if job.request_counts else 0
                client.store.update_llm_batch(batch["id"], status=job.status, answered=done)
                answered_now += done
        if progress is not None:
            progress(answered_now, sum(b["requests"] for b in running))
        if not wait or not _running(client.store, endpoint):
            break
        time.sleep(poll_s)
        poll_s = min(poll_s * 2, max_poll_s)
    return [b for b in client.store.get_llm_batches() if b["id"] in seen]


def _running(store, endpoint: str) -> list[dict]:
    """The endpoint's jobs not yet collected."""
    return [b for b in store.get_llm_batches(open_only=True) if b["endpoint"] == endpoint]


def _enqueued_room(store, endpoint: str, model: str, limit: int) -> float:
    """Estimated tokens that may still join the unfinished jobs of `model` (`batch.enqueued_tokens`)."""
    if not limit:
        return float("inf")
    return limit - sum(b["estimated_tokens"] for b in _running(store, endpoint) if b["model"] == model)


def store_output(store, provider, batch: dict, job) -> None:
    """Read an ended job's output and error files into the call cache and close the job 'collected'. An
    error-file line for a request the job never ran (it expired or was cancelled first) is no failed
    line: the request is released with the others it left unanswered, for the next batch."""
    calls = store.llm_batch_calls(batch["id"])
    price = Price(**batch["prices"])
    lines = [text for file_id in (job.output_file_id, job.error_file_id) if file_id
             for text in provider.files.content(file_id).text.splitlines() if text.strip() and not never_ran(text)]
    rows = [row for text in lines if (row := answer_row(text, calls, price)) is not None]
    ok = [row for row in rows if row["status"] == "ok"]
    store.finish_llm_batch(batch["id"], rows, f"not answered by its batch job ({job.status}); asked again in the "
                                              "next batch", status="collected", answered=len(ok),
                           failed=len(rows) - len(ok), malformed=len(lines) - len(rows),
                           live_cost_usd=sum(price.cost(r["tokens_in"], r["tokens_out"]) for r in ok),
                           cost_usd=sum(r["cost_usd"] for r in ok))


def never_ran(text: str) -> bool:
    """Whether an output or error-file line is about a request its job ended before running."""
    if not any(code in text for code in NEVER_RAN):  # cheap: most lines are answers
        return False
    try:
        error = json.loads(text).get("error") or {}
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and error.get("code") in NEVER_RAN


def answer_row(text: str, calls: dict[str, dict], price: Price) -> dict[str, Any] | None:
    """The call-cache row one line of a job's output or error file makes of the call it answers (whose
    waiting row is in `calls`, by key), at `price`'s batch price, or None for a line that is not one
    (malformed, or about no call of this job)."""
    try:
        line = json.loads(text)
        call = calls[line["custom_id"]]
        response = line.get("response") or {}
        body = response.get("body")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    row = {name: call[name] for name in ("key", "purpose", "model", "request")} | {"seconds": 0.0}
    if line.get("error") or response.get("status_code") != 200:
        why = line.get("error") or (body.get("error") if isinstance(body, dict) else None) \
            or f"HTTP {response.get('status_code')}"
        return row | {"status": "error", "response": None, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0,
                      "error": scrub(f"{BATCH_LINE_FAILED}: {json.dumps(why)[:400]}")}
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        return None
    return row | answered(body, price, price.batch_factor)


def _endpoint(base_url: str | None) -> str:
    return rate_bucket(base_url, "").strip()


def _provider(client: LlmClient):
    """The openai SDK's client for the batch endpoints (a few calls per job: its own retries do)."""
    return openai_sdk().OpenAI(base_url=client.base_url, api_key=client.api_key(),
                            max_retries=client.options.max_retries, timeout=client.options.timeout_s)
