"""The local model server: clear errors before anything starts (model missing, port taken, not
loopback), and the real server (SmolLM2 through llama.cpp) answering our OpenAI client with JSON that
follows the schema, stored once and read back from the store on a rerun."""

from __future__ import annotations

import socket

import pytest

from benchsmith import llm_server
from benchsmith.llm import LlmClient, LlmOptions, LlmRequest
from benchsmith.settings import SettingsError, load_settings
from generators.base import json_format


def server_settings(tmp_path, **over):
    env = {"BENCHSMITH_WORKSPACE": str(tmp_path / "bench")}
    env |= {f"BENCHSMITH__LLM_SERVER__{k.upper()}": str(v) for k, v in over.items()}
    return load_settings(env=env)


def test_a_missing_model_says_what_to_install_and_a_bad_address_or_taken_port_is_refused(tmp_path):
    with pytest.raises(llm_server.LlmServerError, match="name one of smollm2, qwen2.5-coder-1.5b or the path"):
        llm_server.start_detached(server_settings(tmp_path, model=str(tmp_path / "none.gguf")))
    # a model package that is not installed: its name and the line that installs it
    with pytest.raises(llm_server.LlmServerError, match="the model package no-such-model is not installed; "
                                                        "install it with: pip install no-such-model"):
        llm_server._installed_file("no-such-model", "model.gguf", "pip install no-such-model")
    with pytest.raises(SettingsError, match="not a loopback address"):
        llm_server.server_settings(server_settings(tmp_path, host="0.0.0.0"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with pytest.raises(llm_server.LlmServerError, match=f"port {port} on 127.0.0.1 is taken"):
            llm_server.start_detached(server_settings(tmp_path, port=port))
    assert llm_server.stop(server_settings(tmp_path)) is None  # nothing runs: nothing to stop


COLOUR = json_format("colour", {"colour": {"type": "string", "enum": ["red", "green", "blue"]}})


def test_the_real_server_answers_in_the_schema_and_a_rerun_reads_the_stored_call(local_llm, tmp_path, sqlite_store):
    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(tmp_path / "bench"), "OPENAI_BASE_URL": local_llm.base_url})
    request = LlmRequest(purpose="generate", model=local_llm.model, temperature=0.0, max_tokens=20,
                         messages=[{"role": "user", "content": "Pick a colour for a stop sign."}],
                         response_format=COLOUR)
    first = LlmClient(settings, LlmOptions(), store=sqlite_store)
    [answer] = first.run([request])
    assert answer.ok, answer.reason
    assert answer.parsed["colour"] in ("red", "green", "blue") and answer.tokens_in > 0 and answer.tokens_out > 0
    assert first.http_calls == 1 and sqlite_store.get_llm_calls([answer.key])[answer.key]["status"] == "ok"
    again = LlmClient(settings, LlmOptions(), store=sqlite_store)
    [cached] = again.run([request])
    assert again.http_calls == 0 and cached.cached and cached.parsed == answer.parsed


def test_a_cee_judge_prompt_gets_a_real_judgement_through_the_same_request_and_reader(local_llm, tmp_path, sqlite_store):
    """The judge ensemble's request (evaluation.judge) and vote reader on a real reply: a vote or an
    unparseable one (None), never an error. The stage itself sends images, which a text-only model refuses."""
    from evaluation.judge import judge_request, read_vote
    from evaluation.templates import load_templates

    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(tmp_path / "bench"), "OPENAI_BASE_URL": local_llm.base_url})
    prompt = load_templates().judge[0].text.format(question="What colour is the ball?\n(A) red\n(B) blue",
                                                   reference="(A) red", reply="It is red.")
    client = LlmClient(settings, LlmOptions(), store=sqlite_store)
    [judgement] = client.run([judge_request(local_llm.model, prompt, 40)])
    assert judgement.ok and judgement.content.strip()
    assert read_vote(judgement.content) in (0, 1, None)


def test_autostart_serves_the_run_and_stops_after_and_leaves_a_running_server_alone(tmp_path, local_llm):
    from tests.support.services import free_port

    port = free_port()
    settings = server_settings(tmp_path, port=port, autostart="true", context=1024)
    settings = settings.model_copy(update={"services": settings.services.model_copy(
        update={"openai_base_url": f"http://127.0.0.1:{port}/v1"})})
    options = llm_server.server_settings(settings)
    said: list[str] = []
    with llm_server.serving(settings, said.append):
        assert llm_server.healthy(options) and llm_server.running(settings)["model"] == "smollm2"
    assert not llm_server.healthy(options) and llm_server.running(settings) is None
    assert said[0].startswith("llm server: starting smollm2") and said[1].startswith("llm server: stopped")
    # the session's server already answers at its address: used as it is, not stopped
    theirs = local_llm.settings.model_copy(update={"services": settings.services.model_copy(
        update={"openai_base_url": local_llm.base_url})})
    theirs = theirs.model_copy(update={"raw": {**theirs.raw, "llm_server": {**theirs.raw["llm_server"], "autostart": True}}})
    with llm_server.serving(theirs, said.append):
        pass
    assert len(said) == 2 and llm_server.healthy(llm_server.server_settings(theirs))
