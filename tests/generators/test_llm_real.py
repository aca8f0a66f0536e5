"""`generate -g llm` against the real local model (SmolLM2 via llama.cpp): the schema-constrained reply
becomes stored, fact-checked questions (or a failure with its raw text), only what the facts confirm is
kept under `fact_check.keep: confirmed` (the rest dropped with the reason), and a rerun sends nothing."""

from __future__ import annotations

from benchsmith.records import Fact, Image, Provenance
from generators.stage import run_generate
from tests.generators.test_stage import settings_with

SUPPLIED = Provenance(backend="supplied")


def test_the_llm_generator_stores_what_a_real_model_writes_and_a_rerun_sends_nothing(tmp_path, local_llm, sqlite_store):
    sqlite_store.add_items([Image(id="park", path="park.jpg", width=640, height=480)])
    sqlite_store.add_facts("supplied", [
        Fact(item_id="park", kind="object", text="dog", box=(0.1, 0.5, 0.3, 0.9), provenance=SUPPLIED),
        Fact(item_id="park", kind="object", text="dog", box=(0.6, 0.5, 0.8, 0.9), provenance=SUPPLIED),
        Fact(item_id="park", kind="caption", text="Two dogs play on the grass in a park", provenance=SUPPLIED)])
    settings = settings_with(tmp_path, OPENAI_BASE_URL=local_llm.base_url,
                             BENCHSMITH__GENERATE__DIMENSIONS="[instances_counting]",
                             BENCHSMITH__GENERATE__LLM__MODEL=local_llm.model, BENCHSMITH__GENERATE__LLM__MODELS="{}",
                             BENCHSMITH__GENERATE__LLM__QUESTIONS_PER_CALL="1",
                             BENCHSMITH__GENERATE__LLM__MAX_TOKENS="200",
                             BENCHSMITH__GENERATE__LLM__FACT_CHECK__KEEP="confirmed")
    first = run_generate(sqlite_store, settings, generators=["llm"])
    assert first["jobs"] == first["llm_requests"] == 1
    [row] = sqlite_store.ledger_rows("generate:llm")
    questions = sqlite_store.get_questions()
    if row["status"] == "failed":  # a reply cut off at max_tokens is kept with its raw text
        assert row["details"]["raw"] and not questions
    else:
        assert row["status"] == "done" and first["failed_drafts"] == 0
        for question in questions:
            assert len(question.options) == 4 and 0 <= question.answer < 4
            assert question.provenance.model == local_llm.model and question.provenance.tokens_out > 0
            assert question.meta["fact_check"]  # verified, failed or unchecked: never silent
        reasons = {v.subject_id: v.reason for v in sqlite_store.get_verdicts(passed=False)}
        for question in questions:
            if question.status == "candidate":  # confirmed: a count of the two dogs, and no other option says 2
                assert question.meta["fact_check"] == "verified"
                numbers = [o.strip().lower() in ("2", "two") for o in question.options]
                assert "dog" in question.text.lower() and numbers[question.answer] and sum(numbers) == 1
            else:
                assert question.status == "dropped" and reasons[question.id] == question.meta["dropped"]
    [call] = sqlite_store.get_llm_calls([questions[0].provenance.params["llm_call"]]).values() if questions else [None]
    assert call is None or call["status"] == "ok"
    again = run_generate(sqlite_store, settings, generators=["llm"])
    assert again["jobs"] == 0 and again.get("llm_requests", 0) == 0


def test_with_candidates_a_real_models_questions_carry_its_own_key_and_keep_only_confirmed_ones(
        tmp_path, local_llm, sqlite_store):
    """The local-llm profile's way: the prompt holds the counts the facts settle; whatever SmolLM2 writes,
    a kept question's key is the dogs' count, checked here against the scene, and its own letter is kept."""
    sqlite_store.add_items([Image(id="park", path="park.jpg", width=640, height=480)])
    sqlite_store.add_facts("supplied", [
        Fact(item_id="park", kind="object", text="dog", box=(0.1, 0.5, 0.3, 0.9), provenance=SUPPLIED),
        Fact(item_id="park", kind="object", text="dog", box=(0.6, 0.5, 0.8, 0.9), provenance=SUPPLIED)])
    settings = settings_with(tmp_path, OPENAI_BASE_URL=local_llm.base_url,
                             BENCHSMITH__GENERATE__DIMENSIONS="[instances_counting]",
                             BENCHSMITH__GENERATE__LLM__MODEL=local_llm.model, BENCHSMITH__GENERATE__LLM__MODELS="{}",
                             BENCHSMITH__GENERATE__LLM__QUESTIONS_PER_CALL="1",
                             BENCHSMITH__GENERATE__LLM__MAX_TOKENS="200",
                             BENCHSMITH__GENERATE__LLM__FACT_CHECK__KEEP="confirmed",
                             BENCHSMITH__GENERATE__LLM__CANDIDATES__ENABLED="true")
    run_generate(sqlite_store, settings, generators=["llm"])
    [row] = sqlite_store.ledger_rows("generate:llm")
    questions = sqlite_store.get_questions()
    assert row["status"] in ("done", "failed")
    for question in questions:
        assert question.provenance.prompt_version.endswith("+candidates-v2")
        assert question.meta["model_key"] in question.options
        if question.status == "candidate":
            numbers = [o.strip().lower() in ("2", "two") for o in question.options]
            assert "dog" in question.text.lower() and numbers[question.answer] and sum(numbers) == 1
