"""The LLM client facing a hostile endpoint: HTML pages with status 200, trickled bodies, keys echoed back."""

from __future__ import annotations

import time

from benchsmith.llm import LlmClient, LlmOptions, LlmRequest
from benchsmith.secrets import scrub
from tests.support.openai_server import ScriptedOpenAI, chat_completion, echo_key, html_page, trickle
from tests.benchsmith.test_llm import settings_for

CANARY = "sk-canary-3f9a7c1e5b2d4068a1c3e5f7b9d1f3a5"
OPTIONS = LlmOptions(backoff_s=0.01, max_retries=1, timeout_s=5, deadline_s=5)


def key_fragments(key: str, length: int = 8) -> set[str]:
    """Every run of `length` characters of `key`: none may appear anywhere."""
    return {key[i:i + length] for i in range(len(key) - length + 1)}


def ask(text: str) -> LlmRequest:
    return LlmRequest(purpose="generate", model="m", messages=[{"role": "user", "content": text}])


def test_an_html_page_with_status_200_is_a_failure_and_calls_in_flight_are_kept(tmp_path, store):
    def respond(request):
        text = request["messages"][0]["content"]
        if text == "proxy":
            return html_page(200)
        reply = chat_completion(f"answer to {text}")
        reply.delay = 0.5  # still in flight when the HTML page comes back
        return reply

    with ScriptedOpenAI(respond) as server:
        client = LlmClient(settings_for(tmp_path, server.base_url), OPTIONS, store)
        results = client.run([ask("proxy"), ask("one"), ask("two")])
        assert not results[0].ok and "text/html" in results[0].reason
        assert [r.content for r in results[1:]] == ["answer to one", "answer to two"]
        stored = store.get_llm_calls([r.key for r in results])
        assert [stored[r.key]["status"] for r in results] == ["error", "ok", "ok"]
        calls = server.calls
        again = LlmClient(settings_for(tmp_path, server.base_url), OPTIONS, store).run([ask("one"), ask("two")])
        assert all(r.cached for r in again) and server.calls == calls  # the answers were not paid twice


def test_a_body_trickled_a_byte_a_second_meets_the_call_deadline(tmp_path, store):
    options = OPTIONS.model_copy(update={"timeout_s": 2, "deadline_s": 1.5, "max_retries": 3})
    with ScriptedOpenAI(lambda _r: trickle(chat_completion("slow"), every_s=0.2)) as server:
        started = time.monotonic()
        [result] = LlmClient(settings_for(tmp_path, server.base_url), options, store).run([ask("a")])
        elapsed = time.monotonic() - started
    assert not result.ok and "llm deadline_s" in result.reason
    assert elapsed < 4, f"the call took {elapsed:.1f} s against a deadline of 1.5 s"


def test_a_key_echoed_by_a_401_reaches_neither_the_result_nor_the_store_nor_the_output(tmp_path, store, capsys):
    with ScriptedOpenAI(lambda request: echo_key(401, request)) as server:
        [result] = LlmClient(settings_for(tmp_path, server.base_url, api_key=CANARY), OPTIONS, store).run([ask("a")])
    assert not result.ok and result.reason.startswith("HTTP 401")
    stored = store.get_llm_calls([result.key])[result.key]
    captured = capsys.readouterr()
    for text in (result.reason, stored["error"], captured.out, captured.err):
        assert not [f for f in key_fragments(CANARY) if f in text], text
    assert "[redacted]" in result.reason


def test_scrub_removes_whole_keys_and_every_run_of_eight_of_their_characters():
    key = "sk-abcdefghijklmnop0123456789"
    text = f"bad key {key}; yours looks like sk-...ghijklmnop01 or {key[:6]}***{key[-9:]}"
    scrubbed = scrub(text, [key])
    assert not [f for f in key_fragments(key) if f in scrubbed]
    assert scrubbed.startswith("bad key [redacted];")
