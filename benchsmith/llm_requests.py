"""What live calls (`benchsmith.llm`) and batch jobs (`benchsmith.llm_batch`) share: the request and its
cache key, prices, the call-cache columns of an answer, the provider's rate-limit bucket, the openai SDK
and how a failure is told without secrets."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field

from benchsmith.errors import BenchsmithError
from benchsmith.records import stable_hash
from benchsmith.secrets import scrub
from benchsmith.settings import Strict

Purpose = Literal["generate", "solve", "evaluate", "match", "judge"]


BATCH_LINE_FAILED = "batch line failed"  # how a call-cache row whose batch line failed starts its error


class LlmError(BenchsmithError, RuntimeError):
    """The LLM cannot be called as configured; the message says what to set."""


class Price(Strict):
    input_per_mtok: float = 0.0   # US dollars per million prompt tokens
    output_per_mtok: float = 0.0  # US dollars per million completion tokens
    batch_factor: float = Field(0.5, ge=0)  # batch jobs cost this share of the live price

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1_000_000


class LlmRequest(Strict):
    """One chat completion to make. Everything except `purpose` and `tag` goes into the cache key."""

    purpose: Purpose
    model: str
    messages: list[dict[str, Any]]
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    response_format: dict[str, Any] | None = None  # {"type": "json_schema", "json_schema": {...}} or json_object
    logprobs: bool | None = None
    top_logprobs: int | None = None
    tag: str = ""  # caller's label (an item id, say), kept with the cached row for audits

    def params(self) -> dict[str, Any]:
        fields = ("temperature", "seed", "max_tokens", "response_format", "logprobs", "top_logprobs")
        return {name: getattr(self, name) for name in fields if getattr(self, name) is not None}

    @property
    def key(self) -> str:
        return stable_hash("chat.completions", self.model, self.messages, self.params(), length=40)

    def stored(self) -> dict[str, Any]:
        """The request as the call ledger keeps it: an inline image (a base64 data URL) is replaced by
        its digest, so the ledger does not hold a copy of every image evaluated."""
        return {**self.model_dump(exclude={"purpose"}), "messages": _without_inline_data(self.messages)}

    def estimated_tokens(self) -> int:
        """A cheap upper-ish guess for the token limiter: ~4 characters a token, plus the output cap."""
        return len(json.dumps(self.messages, ensure_ascii=False)) // 4 + (self.max_tokens or 256)


def answered(response: dict[str, Any], price: Price, share: float = 1.0) -> dict[str, Any]:
    """The call-cache columns of a chat completion, live or from a batch job's output (costing `share`
    of the live price)."""
    choice = response["choices"][0] if response.get("choices") else {}
    usage = response.get("usage") or {}
    tokens_in, tokens_out = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    return {"status": "ok", "error": "", "tokens_in": tokens_in, "tokens_out": tokens_out,
            "cost_usd": price.cost(tokens_in, tokens_out) * share,
            "response": {"content": (choice.get("message") or {}).get("content") or "",
                         "logprobs": (choice.get("logprobs") or {}).get("content"),
                         "finish_reason": choice.get("finish_reason")}}


def rate_bucket(base_url: str | None, model: str) -> str:
    """What a provider's rate limit applies to: the endpoint (with no credentials or query) and the model."""
    parts = urlsplit(base_url or "https://api.openai.com/v1")  # where the openai client sends calls by default
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path.rstrip('/')} {model}"


class NotAChatCompletion(Exception):
    """The server answered 200 with something else (an HTML page from a proxy, say)."""


_AIOHTTP_TRANSPORT = "openai._vendor.httpx_aiohttp"


def openai_sdk():
    """The openai SDK, imported when a call is really sent (~0.7 s; never on a fully cached rerun).
    openai also imports its optional aiohttp transport whenever aiohttp is installed (datasets brings
    it), ~0.2 s more before the first call goes out; we never use that transport, so the SDK is imported
    as if aiohttp were missing."""
    if "openai" in sys.modules:
        return sys.modules["openai"]
    blocked = _AIOHTTP_TRANSPORT not in sys.modules
    if blocked:
        sys.modules[_AIOHTTP_TRANSPORT] = None  # type: ignore[assignment] - importing it raises ImportError
    try:
        import openai
    finally:
        if blocked and sys.modules.get(_AIOHTTP_TRANSPORT, False) is None:
            del sys.modules[_AIOHTTP_TRANSPORT]
    return openai


def _without_inline_data(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("data:") and ";base64," in value[:80]:
        head, _, data = value.partition(";base64,")
        return f"{head};sha256,{hashlib.sha256(data.encode('ascii', 'replace')).hexdigest()}"
    if isinstance(value, dict):
        return {k: _without_inline_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_inline_data(v) for v in value]
    return value


def owner_gone(owner: str) -> bool:
    """Whether a claim's owner ("in flight: host:pid:nonce") was a process on this machine that has ended."""
    host, _, rest = owner.removeprefix("in flight: ").partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def describe(exc: Exception) -> str:
    """A one-line reason with no request headers in it (they carry the key), scrubbed of secrets
    (servers echo the key in their messages)."""
    openai = openai_sdk()
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        text = f"HTTP {exc.status_code}: {body.get('message') or exc.message}"
    elif isinstance(exc, openai.APITimeoutError):
        text = "timed out"
    elif isinstance(exc, json.JSONDecodeError):
        text = f"the reply is not a chat completion (not JSON: {exc.msg} at character {exc.pos})"
    elif isinstance(exc, NotAChatCompletion):
        text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}"
    return scrub(text)[:500]

