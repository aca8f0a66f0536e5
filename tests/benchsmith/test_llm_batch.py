"""Batch mode (`llm.options.mode: batch`) against the scripted server's Batch API: requests are queued,
submitted as batch jobs when the stage ends its run, and collected into the call cache, where the next
run finds them as it finds live answers. Every request is paid for once, whatever goes wrong."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from benchsmith import llm_batch
from benchsmith.llm import WAITING_FOR_BATCH, LlmClient, LlmError, LlmOptions, LlmRequest, Price
from benchsmith.status import store_status
from benchsmith.store.schema import llm_batches, llm_calls
from tests.benchsmith.test_llm import settings_for
from tests.support.openai_server import ScriptedOpenAI, chat_completion, error

KEY = "sk-batch-canary-0123456789abcdef"
PRICES = {"m": Price(input_per_mtok=2.0, output_per_mtok=8.0)}


def echo(request: dict):
    return chat_completion(f"re: {request['messages'][0]['content']}", prompt_tokens=1000, completion_tokens=500)


def ask(text: str) -> LlmRequest:
    return LlmRequest(purpose="generate", model="m", messages=[{"role": "user", "content": text}], max_tokens=16)


def batch_client(tmp_path, server, store, **batch) -> LlmClient:
    options = LlmOptions(mode="batch", prices=PRICES, max_retries=0, batch=batch)
    return LlmClient(settings_for(tmp_path, server.base_url, KEY), options, store)


def run_and_submit(client: LlmClient, texts: list[str]) -> list:
    """One run of a stage: ask, then submit what was queued, as the runner does when the run ends."""
    results = client.run([ask(t) for t in texts])
    llm_batch.submit_queued()
    return results


def test_queued_requests_are_answered_by_a_batch_job_at_half_price_and_never_sent_twice(tmp_path, store):
    with ScriptedOpenAI(echo) as server:
        client = batch_client(tmp_path, server, store)
        first = run_and_submit(client, ["a", "b", "a"])
        assert {r.reason for r in first} == {WAITING_FOR_BATCH} and not server.completions

        again = run_and_submit(client, ["a", "b"])  # still running: waits, is not queued again
        assert {r.reason for r in again} == {WAITING_FOR_BATCH} and len(server.jobs) == 1
        (running,) = store_status(store)["llm_batches"]
        assert (running["job"], running["status"], running["requests"], running["answered"]) == \
            ("batch_1", "in_progress", 2, 0)

        llm_batch.collect(client)
        answers = run_and_submit(client, ["a", "b"])

    assert [(r.ok, r.content, r.cached) for r in answers] == [(True, "re: a", True), (True, "re: b", True)]
    assert list(server.completions.values()) == [1, 1]
    live = 2 * (1000 * 2.0 + 500 * 8.0) / 1e6
    assert sum(r.cost_usd for r in answers) == pytest.approx(live / 2)
    (job,) = store_status(store)["llm_batches"]
    assert (job["status"], job["requests"], job["answered"]) == ("collected", 2, 2)
    assert (job["cost_usd"], job["live_cost_usd"]) == (pytest.approx(live / 2), pytest.approx(live))


def test_files_are_split_by_the_providers_limits_on_requests_and_bytes():
    requests = [ask(f"question {n}") for n in range(5)]
    by_count = [len(lines) for lines, _held in llm_batch.batch_files(requests, 2, 10_000)]
    line = len(list(llm_batch.batch_files(requests[:1], 9, 10_000))[0][0][0].data)
    by_bytes = [len(lines) for lines, _held in llm_batch.batch_files(requests, 9, 3 * line + 1)]
    held = [held for _lines, held in llm_batch.batch_files(requests, 9, 10_000, room=2.5 * ask("x").estimated_tokens())]
    assert by_count == [2, 2, 1] and by_bytes == [3, 2] and held == [0, 3]


@pytest.mark.parametrize("ending", ["expired", "cancelled"])
def test_a_job_that_ends_early_keeps_what_came_back_and_sends_only_the_rest_again(tmp_path, store, ending):
    with ScriptedOpenAI(echo) as server:
        client = batch_client(tmp_path, server, store)
        server.batch_delay_s = 60.0 if ending == "cancelled" else 0.0  # cancelled while it runs
        run_and_submit(client, ["a", "b", "c", "d"])
        server.batch_delay_s = 0.0
        if ending == "expired":
            server.batch_answers = 1
        else:
            llm_batch._provider(client).batches.cancel("batch_1")  # half the lines were answered
        llm_batch.collect(client)
        kept = {r.content for r in client.run([ask(t) for t in "abcd"]) if r.ok}
        server.batch_answers = None
        run_and_submit(client, list("abcd"))
        llm_batch.collect(client)
        final = client.run([ask(t) for t in "abcd"])

    assert len(kept) == (1 if ending == "expired" else 2)
    assert all(r.ok for r in final) and set(server.completions.values()) == {1}
    first, second = store.get_llm_batches()
    assert (first["status"], first["failed"]) == ("collected", 0) and second["requests"] == 4 - len(kept)


def test_requests_an_expired_job_never_ran_go_into_the_next_batch_even_when_failed_lines_go_live(tmp_path, store):
    with ScriptedOpenAI(echo) as server:
        client = batch_client(tmp_path, server, store, failed_lines="live")
        run_and_submit(client, list("abcd"))
        server.batch_answers = 1  # the job expires after one answer; the provider lists the rest as batch_expired
        llm_batch.collect(client)
        server.batch_answers = None
        second = run_and_submit(client, list("abcd"))
        llm_batch.collect(client)
        final = client.run([ask(t) for t in "abcd"])

    live = [r for r in server.requests if r["_path"].endswith("/chat/completions")]
    assert [r.ok for r in second] == [True, False, False, False] and live == []
    assert all(r.ok for r in final) and set(server.completions.values()) == {1} and len(server.completions) == 4
    first, again = store.get_llm_batches()
    assert (first["answered"], first["failed"], first["malformed"], again["requests"]) == (1, 0, 0, 3)
    assert sum(r.cost_usd for r in final) == pytest.approx(4 * (1000 * 2.0 + 500 * 8.0) / 1e6 / 2)


def test_a_job_a_killed_process_left_that_the_provider_already_finished_is_collected(tmp_path, store):
    import socket

    dead = f"in flight: {socket.gethostname()}:{2**22 + 1}:gone"  # above pid_max: no such process
    requests = [ask(t) for t in "ab"]
    with ScriptedOpenAI(echo) as server:
        client = batch_client(tmp_path, server, store)
        lines = next(llm_batch.batch_files(requests, 10, 10_000))[0]
        store.start_llm_batch({"id": "left", "endpoint": llm_batch._endpoint(server.base_url), "model": "m",
                               "status": "uploading", "owner": dead, "prices": PRICES["m"].model_dump()},
                              [{"key": r.key, "purpose": "generate", "model": "m", "request": r.stored()}
                               for r in requests])
        provider = llm_batch._provider(client)  # the dead process got as far as creating the job
        file = provider.files.create(file=(llm_batch.file_name("left"), b"".join(l.data for l in lines)),
                                     purpose="batch")
        provider.batches.create(input_file_id=file.id, endpoint=llm_batch.CHAT_URL, completion_window="24h",
                                metadata={llm_batch.METADATA_KEY: "left"})
        assert provider.batches.list().data[0].status == "completed"  # it ended on the provider's clock
        llm_batch.collect(client)
        final = client.run(requests)

    assert all(r.ok and r.cached for r in final) and list(server.completions.values()) == [1, 1]
    (job,) = store.get_llm_batches()
    assert (job["status"], job["answered"], job["job_id"]) == ("collected", 2, "batch_1")


def test_malformed_output_lines_are_counted_and_batched_again(tmp_path, store):
    with ScriptedOpenAI(echo) as server:
        client = batch_client(tmp_path, server, store)
        server.malformed_lines = 2
        run_and_submit(client, ["a", "b", "c"])
        llm_batch.collect(client)
        server.malformed_lines = 0
        run_and_submit(client, ["a", "b", "c"])
        llm_batch.collect(client)
        final = client.run([ask(t) for t in "abc"])

    assert all(r.ok for r in final)
    first, second = store.get_llm_batches()
    assert (first["answered"], first["malformed"], second["requests"]) == (1, 2, 2)


@pytest.mark.parametrize("failed_lines", ["batch", "live"])
def test_failed_lines_are_asked_again_in_the_next_batch_or_live(tmp_path, store, failed_lines):
    refuse = {"b"}

    def respond(request):
        return error(500, "overloaded") if request["messages"][0]["content"] in refuse else echo(request)

    with ScriptedOpenAI(respond) as server:
        client = batch_client(tmp_path, server, store, failed_lines=failed_lines)
        run_and_submit(client, ["a", "b"])
        llm_batch.collect(client)
        refuse.clear()
        second = run_and_submit(client, ["a", "b"])
        if failed_lines == "batch":
            llm_batch.collect(client)
        final = client.run([ask("a"), ask("b")])

    assert all(r.ok for r in final)
    assert second[1].ok == (failed_lines == "live")
    assert len(server.jobs) == (2 if failed_lines == "batch" else 1)
    assert store.get_llm_batches()[0]["failed"] == 1


def test_a_server_without_batch_jobs_is_one_line_naming_the_setting_and_holds_nothing_back(tmp_path, store):
    with ScriptedOpenAI(echo) as server:
        server.batches = False
        client = batch_client(tmp_path, server, store)
        client.run([ask("a")])
        with pytest.raises(LlmError) as raised:
            llm_batch.submit_queued()
        live = LlmClient(settings_for(tmp_path, server.base_url, KEY), LlmOptions(), store).run([ask("a")])

    assert "llm.options.mode" in str(raised.value) and "\n" not in str(raised.value)
    assert live[0].ok and store.get_llm_batches()[0]["status"] == "abandoned"


def test_batch_submissions_respect_the_enqueued_token_limit_and_the_rest_waits(tmp_path, store):
    with ScriptedOpenAI(echo) as server:
        client = batch_client(tmp_path, server, store, enqueued_tokens=int(2.5 * ask("a").estimated_tokens()))
        run_and_submit(client, ["a", "b", "c", "d"])
        held = run_and_submit(client, ["a", "b", "c", "d"])  # the queue is still full: nothing more goes
        llm_batch.collect(client)
        run_and_submit(client, ["a", "b", "c", "d"])
        llm_batch.collect(client)
        final = client.run([ask(t) for t in "abcd"])

    assert [job["requests"] for job in store.get_llm_batches()] == [2, 2]
    assert {r.reason for r in held} == {WAITING_FOR_BATCH} and all(r.ok for r in final)


def test_the_api_key_is_in_no_batch_file_and_no_stored_row(tmp_path, store):
    with ScriptedOpenAI(echo) as server:
        client = batch_client(tmp_path, server, store)
        run_and_submit(client, ["a"])
        llm_batch.collect(client)
        uploaded = b"".join(f["data"] for f in server.files.values())
    with store.engine.connect() as conn:
        stored = json.dumps([dict(r._mapping) for t in (llm_calls, llm_batches) for r in conn.execute(sa.select(t))],
                            default=str)
    assert uploaded and KEY[:12] not in uploaded.decode() and KEY[:12] not in stored


def test_a_job_whose_file_never_reached_the_provider_is_released_and_batched_again(tmp_path, store):
    import socket

    dead = f"in flight: {socket.gethostname()}:{2**22 + 1}:gone"  # above pid_max: no such process
    request = ask("a")
    with ScriptedOpenAI(echo) as server:
        client = batch_client(tmp_path, server, store)
        store.start_llm_batch({"id": "lost", "endpoint": llm_batch._endpoint(server.base_url), "model": "m",
                               "status": "uploading", "owner": dead, "prices": {}},
                              [{"key": request.key, "purpose": "generate", "model": "m", "request": request.stored()}])
        waiting = client.run([request])
        llm_batch.collect(client)
        run_and_submit(client, ["a"])
        llm_batch.collect(client)
        final = client.run([request])

    assert waiting[0].reason == WAITING_FOR_BATCH and final[0].ok
    assert [job["status"] for job in store.get_llm_batches()] == ["abandoned", "collected"]
    abandoned = store_status(store)["llm_batches"][0]  # as `status` and the run report show it
    assert (abandoned["cost_usd"], abandoned["live_cost_usd"]) == (0, 0)
    assert len(server.jobs) == 1 and list(server.completions.values()) == [1]
