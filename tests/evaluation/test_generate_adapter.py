"""Black-box answers from a local transformers VLM: tiny random LLaVA and Idefics3 models saved to disk
and loaded through the production path, some rewired so that greedy decoding says a known token."""

from __future__ import annotations

import pytest

from evaluation.adapters import VlmGenerateConfig
from evaluation.adapters.generate import GenerateAdapter
from evaluation.contract import configured, protocol
from evaluation.sources import Source
from evaluation.stage import evaluate, passes
from evaluation.templates import load_templates
from tests.evaluation.conftest import with_evaluate
from tests.evaluation.test_likelihood_adapter import QUESTIONS, VIDEO
from evaluation.sources import from_folder
from tests.evaluation.tiny_vlms import force_reply, save_tiny_idefics3, save_tiny_llava
from tests.support.openai_server import ScriptedOpenAI, chat_completion

MAKERS = {"llava": save_tiny_llava, "idefics3": save_tiny_idefics3}


@pytest.fixture(scope="module", params=sorted(MAKERS))
def says_b(request, tmp_path_factory):
    return str(force_reply(MAKERS[request.param](tmp_path_factory.mktemp(request.param)), "B"))


@pytest.fixture(scope="module")
def says_z(tmp_path_factory):
    return str(force_reply(save_tiny_llava(tmp_path_factory.mktemp("llava-z")), "z"))


@pytest.fixture(scope="module")
def random_llava(tmp_path_factory):
    return str(save_tiny_llava(tmp_path_factory.mktemp("llava")))


def adapter(model: str, **options) -> GenerateAdapter:
    return GenerateAdapter("tiny", VlmGenerateConfig(kind="generate", model=model, device="cpu", **options),
                           load_templates())


def test_a_model_that_says_b_picks_the_second_shown_option_on_every_rotation(says_b):
    shown = passes(QUESTIONS, protocol("circular"))
    answers = dict(adapter(says_b, max_new_tokens=1, batch_size=3).predict(shown))
    assert len(answers) == len(shown) == 16
    for p, answer in answers.items():
        assert (answer.raw, answer.choice, answer.matched_by) == ("B", 1, "letter")
        assert p.original(answer.choice) == p.order[1]   # the option shown second, wherever it came from


def test_a_reply_that_names_no_option_is_kept_as_it_came(says_z):
    shown = passes(QUESTIONS[:2], protocol("single"))
    answers = dict(adapter(says_z, max_new_tokens=3).predict(shown))
    assert [(a.raw, a.choice, a.matched_by) for a in answers.values()] == [("zzz", None, "")] * 2


def test_batches_give_the_replies_of_one_pass_at_a_time(random_llava):
    shown = passes([*QUESTIONS, VIDEO], protocol("single"))
    one = {p.subject: a.raw for p, a in adapter(random_llava, batch_size=1, max_new_tokens=6).predict(shown)}
    many = {p.subject: a.raw for p, a in adapter(random_llava, batch_size=5, max_new_tokens=6).predict(shown)}
    assert one == many and len(one) == 5
    assert len(set(one.values())) > 1 and all(one.values())   # a random model, saying different things


def test_a_release_scored_through_the_stage_records_matches_misses_and_skips(published, tmp_path, says_z, llava_b):
    from evaluation.board import collect, leaderboard

    questions = from_folder(published.folder)
    settings = with_evaluate(published.settings, tmp_path, {"models": {
        "says-b": {"kind": "generate", "model": llava_b, "device": "cpu", "max_new_tokens": 1, "video": False},
        "says-z": {"kind": "generate", "model": says_z, "device": "cpu", "max_new_tokens": 2}}})
    source = Source("release:v1", questions)
    for name in ("says-b", "says-z"):
        evaluate(published.store, configured(settings).stage(published.store, settings, source, name))
    rows = {row["model"]: row for row in leaderboard(collect(published.store, source), source, 200).rows}
    images = [q for q in questions if q.data_type == "image"]
    keyed_b = sum(q.answer == 1 for q in images)
    assert 0 < keyed_b < len(images)
    assert rows["says-b"]["questions"] == len(images) and rows["says-b"]["format_hit"] == 1.0
    assert rows["says-b"]["overall"] == pytest.approx(keyed_b / len(images))
    assert rows["says-z"]["format_hit"] == 0.0 and rows["says-z"]["overall"] == 0.0
    stored = published.store.predictions([r["id"] for r in published.store.eval_runs("release:v1")])
    assert {r["raw"] for r in stored if r["status"] == "unmatched"} == {"zz"}
    assert sum(r["status"] == "skipped" for r in stored) == len(questions) - len(images)


def test_replies_that_match_nothing_go_to_the_llm_matcher_when_one_is_set(published, tmp_path, says_z):
    matched = []

    def matcher(request: dict):
        matched.append(request["messages"][0]["content"])
        return chat_completion("C")

    questions = [q for q in from_folder(published.folder) if q.data_type == "image"][:3]
    with ScriptedOpenAI(matcher) as server:
        settings = with_evaluate(published.settings, tmp_path, {"models": {"says-z": {
            "kind": "generate", "model": says_z, "device": "cpu", "max_new_tokens": 2,
            "matcher_model": "matcher"}}}, openai_base_url=server.base_url)
        source = Source("release:v1", questions)
        stage = configured(settings).stage(published.store, settings, source, "says-z")
        evaluate(published.store, stage)
        rows = published.store.predictions([stage.run.id])
        assert [(r["choice"], r["matched_by"], r["raw"]) for r in rows] == [(2, "llm", "zz")] * 3
        assert len(matched) == 3 and "<<<REPLY\nzz\nREPLY>>>" in matched[0]
        evaluate(published.store, configured(settings).stage(published.store, settings, source, "says-z"))
        assert server.calls == 3                    # a rerun loads nothing and asks the matcher nothing


@pytest.fixture(scope="module")
def llava_b(tmp_path_factory):
    return str(force_reply(save_tiny_llava(tmp_path_factory.mktemp("llava-b")), "B"))
