"""The judges against the real local model (SmolLM2 via llama.cpp, text only): the CEE ensemble's calls on
a reply and ConvEval's direct and pairwise calls on a conversation go through the same OpenAI client as a
hosted judge, with no image, and come back as judgements the readers take (a vote, a rating, a verdict, or
none). What the small model decides is not asserted: it knows little."""

from __future__ import annotations

from benchsmith.llm import LlmClient, LlmOptions
from benchsmith.records import Turn
from evaluation.conveval import PROMPTS, JudgePrompts, Unit, judge_requests, model_is_a
from evaluation.judge import cee_requests, decide, pooled_outcome, pooled_score, read_rating, read_verdict, read_vote
from evaluation.records import EvalConversation
from evaluation.templates import load_prompt_file, load_templates
from tests.generators.test_stage import settings_with

OPTIONS = LlmOptions(concurrency=1, timeout_s=300, deadline_s=600)


def test_the_cee_ensemble_grades_replies_through_a_real_text_only_model(tmp_path, local_llm):
    prompts = load_templates().judge
    question = "What colour is the bus?\nA. red\nB. blue\nC. green\nD. white"
    replies = ["The bus in the picture is red.", "I think the bus is green."]
    requests = [r for n, reply in enumerate(replies) for r in cee_requests(local_llm.model, prompts, question, "(A) red",
                                                                         reply, f"reply{n}")]
    assert all(isinstance(m["content"], str) for r in requests for m in r.messages)   # no image part
    results = LlmClient(settings_with(tmp_path, OPENAI_BASE_URL=local_llm.base_url), OPTIONS).run(requests)
    assert all(r.ok and r.content.strip() for r in results), [r.reason for r in results if not r.ok]
    votes = [read_vote(r.content) for r in results]
    assert len(votes) == len(prompts) * len(replies) and set(votes) <= {0, 1, None}
    for n in range(len(replies)):
        assert decide(votes[n * len(prompts):(n + 1) * len(prompts)]) in (True, False)


def test_convevals_judge_rates_and_compares_a_conversation_through_a_real_text_only_model(tmp_path, local_llm):
    turns = [Turn(level="perception", instruction="How many blue shapes are there?", reference="Two blue shapes.",
                  focus_points=["says two"]),
             Turn(level="reasoning", instruction="Which of them would roll, and why?",
                  reference="The circle, because it is round.", focus_points=["names the circle"]),
             Turn(level="creation", instruction="Write a one-line advert for it.",
                  reference="Roll with it: the blue circle.", focus_points=["one line", "the circle"])]
    unit = Unit(EvalConversation.of("c1", turns, [b"not sent"]), "perception_reasoning_given")  # answers turn 3
    every = load_prompt_file(JudgePrompts, None, PROMPTS, "evaluate.conveval.prompts")
    prompts = JudgePrompts(direct=every.direct[:1], pairwise=every.pairwise[:1])
    answers = [t.reference for t in turns[:2]] + ["The blue circle: it rolls wherever you go."]
    calls = judge_requests(local_llm.model, prompts, unit, answers, [t.reference for t in turns], 200)
    assert [key for key, _r in calls] == [("direct", 3, 0), ("direct", 0, 0), ("pairwise", 3, 0), ("pairwise", 0, 0)]
    assert all(isinstance(m["content"], str) for _k, r in calls for m in r.messages)
    results = LlmClient(settings_with(tmp_path, OPENAI_BASE_URL=local_llm.base_url), OPTIONS).run([r for _k, r in calls])
    assert all(r.ok and r.content.strip() for r in results), [r.reason for r in results if not r.ok]
    texts = {key: r.content for (key, _r), r in zip(calls, results)}
    ratings = [read_rating(texts[("direct", t, 0)]) for t in unit.targets]
    assert all(v is None or 1 <= v <= 10 for v in ratings)
    score = pooled_score(ratings)
    assert score is None or 1 <= score <= 10
    outcomes = [read_verdict(texts[("pairwise", t, 0)], model_is_a(unit.subject, t, 0)) for t in unit.targets]
    assert set(outcomes) <= {"win", "tie", "lose", None} and pooled_outcome(outcomes) in ("win", "tie", "lose", None)
