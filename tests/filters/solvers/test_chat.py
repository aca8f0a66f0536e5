"""The OpenAI-compatible solver against a scripted server on 127.0.0.1, through benchsmith.llm."""

from __future__ import annotations

import re

import pytest

from benchsmith.settings import Services
from filters.blind import BlindSettings, answer_rotated, judge_questions
from filters.solvers import ChatConfig, Query, build_solver
from tests.support.openai_server import ScriptedOpenAI, chat_completion, error

QUERY = Query("What colour is the large circle?", ("red", "blue", "green", "yellow"))
FAST_RETRIES = {"backoff_s": 0.01, "max_retries": 2}


def shown_options(request: dict) -> dict[str, str]:
    return dict(re.findall(r"^([A-D])\. (.+)$", request["messages"][0]["content"], flags=re.M))


def letter_of(option: str):
    """A responder that always answers the letter under which `option` is shown."""
    def respond(request: dict):
        return chat_completion({v: k for k, v in shown_options(request).items()}[option])
    return respond


def make_solver(settings, server, store=None, **options):
    settings = settings.model_copy(update={"services": Services(openai_base_url=server.base_url)})
    return build_solver(ChatConfig(kind="openai", model="scripted", llm=FAST_RETRIES, **options),
                        settings=settings, store=store)


def test_it_asks_for_the_letter_without_the_image_and_reads_the_reply(settings):
    with ScriptedOpenAI(letter_of("green")) as server:
        solver = make_solver(settings, server)
        [answered] = answer_rotated(solver, [QUERY], rotations=4)
    assert answered["choices"] == [2, 2, 2, 2]
    request = server.requests[0]
    assert shown_options(request) == {"A": "red", "B": "blue", "C": "green", "D": "yellow"}
    assert "image_url" not in str(request["messages"])
    assert request["temperature"] == 0.0


def test_a_reply_without_a_letter_knows_nothing(settings):
    with ScriptedOpenAI(lambda _r: chat_completion("I cannot see the image.")) as server:
        [answered] = answer_rotated(make_solver(settings, server), [QUERY], rotations=4)
    assert answered["choices"] == [0, 1, 2, 3]  # the first option shown each time: a tie
    assert answered["scores"] == [0.0, 0.0, 0.0, 0.0]


def test_logprobs_rank_every_option(settings):
    def respond(request):
        assert request["logprobs"] is True and request["max_tokens"] == 4
        shown = shown_options(request)
        logprob = {"red": -3.0, "blue": -0.2, "green": -2.0, "yellow": -5.0}
        top = [{"token": letter, "logprob": logprob[option], "bytes": None} for letter, option in shown.items()]
        return chat_completion("B", logprobs=[{"token": "B", "logprob": -0.2, "bytes": None, "top_logprobs": top}])

    with ScriptedOpenAI(respond) as server:
        [answered] = answer_rotated(make_solver(settings, server, use_logprobs=True), [QUERY], rotations=2)
    assert answered["choices"] == [1, 1]
    assert answered["scores"] == pytest.approx([-3.0, -0.2, -2.0, -5.0])


def test_answers_are_cached_in_the_store_and_never_paid_twice(settings, store):
    with ScriptedOpenAI(letter_of("red")) as server:
        first = make_solver(settings, server, store=store).answer([QUERY])
        calls = server.calls
        second = make_solver(settings, server, store=store).answer([QUERY])
    assert calls == 1 and server.calls == 1
    assert first == second


def test_rate_limited_calls_are_retried_and_failures_leave_the_question_pending(settings):
    replies = iter([error(429, retry_after=0.01), chat_completion("A")])
    with ScriptedOpenAI(lambda _r: next(replies)) as server:
        [prediction] = make_solver(settings, server).answer([QUERY])
    assert prediction.choice == 0 and server.calls == 2

    from benchsmith.records import Provenance, Question

    q = Question(item_id="i", dimension_id=3, text=QUERY.text, options=list(QUERY.options), answer=0,
                 provenance=Provenance(backend="test"))
    with ScriptedOpenAI(lambda _r: error(503)) as server:
        verdicts = judge_questions([q], [make_solver(settings, server)], BlindSettings(rotations=1))
    assert verdicts == []
    assert server.calls == 1 + FAST_RETRIES["max_retries"]
