"""The LLM client against a real OpenAI-compatible HTTP server on 127.0.0.1, with the real openai client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from benchsmith.llm import LlmClient, LlmError, LlmOptions, LlmRequest, Price, RateLimiter
from benchsmith.settings import load_settings
from benchsmith.store.schema import llm_calls
from tests.support.openai_server import Reply, ScriptedOpenAI, chat_completion, error, json_completion

SCHEMA = {"type": "object", "required": ["answer"], "additionalProperties": False,
          "properties": {"answer": {"type": "string"}}}
JSON_FORMAT = {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": SCHEMA}}
FAST = LlmOptions(backoff_s=0.01, max_retries=2, timeout_s=5)


def settings_for(tmp_path, base_url: str, api_key: str | None = None):
    env = {"BENCHSMITH_WORKSPACE": str(tmp_path / "bench")}
    if base_url:
        env["OPENAI_BASE_URL"] = base_url
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    return load_settings(env=env)


def ask(text: str, **params) -> LlmRequest:
    return LlmRequest(purpose="generate", model="m-small", messages=[{"role": "user", "content": text}],
                      response_format=JSON_FORMAT, temperature=0.7, seed=3, **params)


def test_valid_json_is_parsed_costed_and_never_paid_twice(tmp_path, store):
    options = FAST.model_copy(update={"prices": {"m-small": Price(input_per_mtok=2.0, output_per_mtok=8.0)}})
    with ScriptedOpenAI(lambda req: json_completion({"answer": "blue"}, prompt_tokens=1000,
                                                    completion_tokens=500)) as server:
        client = LlmClient(settings_for(tmp_path, server.base_url), options, store)
        first = client.run([ask("a"), ask("b")])
        assert [r.parsed for r in first] == [{"answer": "blue"}, {"answer": "blue"}]
        assert all(r.ok and not r.cached for r in first)
        assert first[0].tokens_in == 1000 and first[0].tokens_out == 500
        assert first[0].cost_usd == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)
        sent = server.requests[0]
        assert sent["model"] == "m-small" and sent["temperature"] == 0.7 and sent["seed"] == 3
        assert sent["response_format"] == JSON_FORMAT

        again = LlmClient(settings_for(tmp_path, server.base_url), options, store).run([ask("b"), ask("a")])
        assert server.calls == 2
        assert [r.cached for r in again] == [True, True]
        assert again[0].parsed == {"answer": "blue"} and again[0].cost_usd == first[1].cost_usd
    totals = store.llm_totals()
    assert totals[("generate", "m-small", "ok")]["calls"] == 2
    assert totals[("generate", "m-small", "ok")]["tokens_in"] == 2000


def test_identical_requests_in_one_batch_are_sent_once_and_all_answered(tmp_path, store):
    seen = []
    with ScriptedOpenAI(lambda req: json_completion({"answer": "blue"})) as server:
        client = LlmClient(settings_for(tmp_path, server.base_url), FAST, store)
        results = client.run([ask("a"), ask("b"), ask("a")], on_result=lambda request, result: seen.append(
            request.messages[0]["content"]))
        assert server.calls == 2
    assert [r.parsed for r in results] == [{"answer": "blue"}] * 3 and results[0].key == results[2].key
    assert sorted(seen) == ["a", "a", "b"]
    assert store.llm_totals()[("generate", "m-small", "ok")]["calls"] == 2


def test_invalid_json_fails_with_reason_and_raw_text(tmp_path, store):
    with ScriptedOpenAI(lambda req: chat_completion('{"answer": "blue"')) as server:
        [result] = LlmClient(settings_for(tmp_path, server.base_url), FAST, store).run([ask("a")])
        assert not result.ok
        assert result.reason.startswith("invalid JSON")
        assert result.content == '{"answer": "blue"'
        # the call itself was paid for: a rerun gets the same failure from the cache
        [again] = LlmClient(settings_for(tmp_path, server.base_url), FAST, store).run([ask("a")])
        assert server.calls == 1 and again.cached and not again.ok


def test_schema_violation_fails_with_the_offending_field(tmp_path):
    with ScriptedOpenAI(lambda req: json_completion({"answer": 4, "extra": True})) as server:
        [result] = LlmClient(settings_for(tmp_path, server.base_url), FAST).run([ask("a")])
    assert not result.ok
    assert result.reason.startswith("schema violation")
    assert json.loads(result.content) == {"answer": 4, "extra": True}


def test_429_waits_for_retry_after_then_succeeds(tmp_path, store):
    replies = iter([error(429, "slow down", retry_after=0.6), json_completion({"answer": "ok"})])
    with ScriptedOpenAI(lambda req: next(replies)) as server:
        started = time.monotonic()
        [result] = LlmClient(settings_for(tmp_path, server.base_url), FAST, store).run([ask("a")])
        elapsed = time.monotonic() - started
    assert result.ok and result.attempts == 2 and server.calls == 2
    assert elapsed >= 0.6


def test_persistent_500_gives_up_after_the_retries_and_is_retried_on_rerun(tmp_path, store):
    with ScriptedOpenAI(lambda req: error(500, "boom")) as server:
        [result] = LlmClient(settings_for(tmp_path, server.base_url), FAST, store).run([ask("a")])
        assert not result.ok and result.reason == "HTTP 500: boom" and result.attempts == 3
        assert server.calls == 3
        LlmClient(settings_for(tmp_path, server.base_url), FAST, store).run([ask("a")])
        assert server.calls == 6
    assert store.llm_totals()[("generate", "m-small", "error")]["calls"] == 1


def test_a_4xx_is_not_retried(tmp_path):
    with ScriptedOpenAI(lambda req: error(400, "bad model")) as server:
        [result] = LlmClient(settings_for(tmp_path, server.base_url), FAST).run([ask("a")])
        assert server.calls == 1
    assert not result.ok and "400" in result.reason


def test_a_slow_reply_times_out_and_is_retried(tmp_path):
    replies = iter([Reply(**{**json_completion({"answer": "late"}).__dict__, "delay": 2.0}),
                    json_completion({"answer": "quick"})])
    options = FAST.model_copy(update={"timeout_s": 0.5})
    with ScriptedOpenAI(lambda req: next(replies)) as server:
        [result] = LlmClient(settings_for(tmp_path, server.base_url), options).run([ask("a")])
    assert result.ok and result.parsed == {"answer": "quick"} and result.attempts == 2


def test_always_slow_fails_as_timed_out(tmp_path):
    options = FAST.model_copy(update={"timeout_s": 0.3, "max_retries": 1})
    slow = Reply(**{**json_completion({"answer": "late"}).__dict__, "delay": 1.0})
    with ScriptedOpenAI(lambda req: slow) as server:
        [result] = LlmClient(settings_for(tmp_path, server.base_url), options).run([ask("a")])
    assert not result.ok and result.reason == "timed out" and result.attempts == 2


def test_concurrency_is_capped_and_one_bad_call_does_not_sink_the_batch(tmp_path):
    def respond(req):
        text = req["messages"][0]["content"]
        if text == "q3":
            return chat_completion("not json at all")
        return Reply(**{**json_completion({"answer": text}).__dict__, "delay": 0.2})

    options = FAST.model_copy(update={"concurrency": 4})
    with ScriptedOpenAI(respond) as server:
        results = LlmClient(settings_for(tmp_path, server.base_url), options).run([ask(f"q{i}") for i in range(12)])
        assert server.max_in_flight == 4
    assert [r.ok for r in results] == [i != 3 for i in range(12)]
    assert [r.parsed["answer"] for r in results if r.ok] == [f"q{i}" for i in range(12) if i != 3]


def test_rate_limiter_holds_back_what_exceeds_the_budget():
    async def scenario():
        limiter = RateLimiter(requests_per_minute=0, tokens_per_minute=600)  # 10 tokens a second
        started = time.monotonic()
        await limiter.acquire(600)  # the whole first minute's budget, at once
        burst = time.monotonic() - started
        await limiter.acquire(5)  # must wait for half a second of refill
        return burst, time.monotonic() - started

    burst, total = asyncio.run(scenario())
    assert burst < 0.1
    assert 0.45 <= total < 1.5


def test_requests_per_minute_spaces_calls_once_the_bucket_is_empty():
    async def scenario():
        limiter = RateLimiter(requests_per_minute=120, tokens_per_minute=0)  # 2 a second
        for _ in range(120):
            await limiter.acquire(1)
        started = time.monotonic()
        await limiter.acquire(1)
        return time.monotonic() - started

    assert 0.4 <= asyncio.run(scenario()) < 1.0


def test_logprobs_are_passed_through(tmp_path):
    tokens = [{"token": "B", "logprob": -0.1, "bytes": None, "top_logprobs": [
        {"token": "B", "logprob": -0.1, "bytes": None}, {"token": "A", "logprob": -2.5, "bytes": None}]}]
    with ScriptedOpenAI(lambda req: chat_completion("B", logprobs=tokens)) as server:
        request = LlmRequest(purpose="solve", model="m", messages=[{"role": "user", "content": "?"}],
                             max_tokens=1, logprobs=True, top_logprobs=2)
        [result] = LlmClient(settings_for(tmp_path, server.base_url), FAST).run([request])
        assert server.requests[0]["logprobs"] is True and server.requests[0]["top_logprobs"] == 2
    assert result.ok and result.parsed is None and result.content == "B"
    assert result.logprobs[0]["top_logprobs"][1] == {"token": "A", "logprob": -2.5, "bytes": None}


def test_the_key_is_sent_but_never_stored(tmp_path, store):
    with ScriptedOpenAI(lambda req: error(401, "who are you")) as server:
        client = LlmClient(settings_for(tmp_path, server.base_url, api_key="sk-very-secret-1234"), FAST, store)
        [result] = client.run([ask("a")])
        assert server.requests[0]["_authorization"] == "Bearer sk-very-secret-1234"
    with store.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sa.select(llm_calls))]
    assert rows and "sk-very-secret" not in json.dumps(rows, default=str)
    assert "sk-very-secret" not in result.model_dump_json()


def test_the_openai_api_needs_a_key_but_a_cached_rerun_does_not(tmp_path, store):
    with ScriptedOpenAI(lambda req: json_completion({"answer": "x"})) as server:
        LlmClient(settings_for(tmp_path, server.base_url), FAST, store).run([ask("a")])
    no_server = settings_for(tmp_path, "")
    [cached] = LlmClient(no_server, FAST, store).run([ask("a")])
    assert cached.cached and cached.ok
    with pytest.raises(LlmError, match="OPENAI_API_KEY"):
        LlmClient(no_server, FAST, store).run([ask("new")])


def test_the_cache_key_covers_model_messages_and_params():
    base = ask("a")
    assert base.key == ask("a").key
    assert len({base.key, ask("b").key, ask("a", max_tokens=9).key,
                base.model_copy(update={"model": "other"}).key,
                base.model_copy(update={"temperature": 0.0}).key}) == 5
    assert base.model_copy(update={"tag": "item-1"}).key == base.key


def test_a_reply_that_is_not_a_chat_completion_is_retried_then_failed_not_raised(tmp_path):
    from benchsmith.llm import LlmClient, LlmOptions, LlmRequest
    from benchsmith.settings import load_settings
    from tests.support.openai_server import Reply, ScriptedOpenAI

    with ScriptedOpenAI(lambda _r: Reply(status=200, body="<html>bad gateway</html>")) as server:
        settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(tmp_path), "OPENAI_BASE_URL": server.base_url})
        client = LlmClient(settings, LlmOptions(max_retries=2, backoff_s=0))
        [result] = client.run([LlmRequest(purpose="generate", model="m", messages=[{"role": "user", "content": "q"}])])
        assert not result.ok and "not a chat completion" in result.reason
        assert server.calls == 3


def test_calls_go_out_without_loading_the_sdks_optional_aiohttp_transport(tmp_path):
    # aiohttp is installed here (datasets needs it): openai would import it with itself, ~0.2 s of every
    # first call. A fresh interpreter, so nothing imported openai before.
    script = """
import sys
from benchsmith.llm import LlmClient, LlmOptions, LlmRequest
from benchsmith.settings import load_settings
from tests.support.openai_server import ScriptedOpenAI, json_completion
import importlib.util
assert importlib.util.find_spec("aiohttp") is not None, "aiohttp is not installed: this test proves nothing"
with ScriptedOpenAI(lambda req: json_completion({"answer": "x"})) as server:
    settings = load_settings(env={"BENCHSMITH_WORKSPACE": sys.argv[1], "OPENAI_BASE_URL": server.base_url})
    [result] = LlmClient(settings, LlmOptions()).run([LlmRequest(purpose="generate", model="m",
                                                                 messages=[{"role": "user", "content": "q"}])])
assert result.ok, result.reason
assert "openai" in sys.modules and "aiohttp" not in sys.modules, sorted(m for m in sys.modules if "aiohttp" in m)
import openai._vendor.httpx_aiohttp  # still importable by whoever wants it
"""
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "bench")], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
