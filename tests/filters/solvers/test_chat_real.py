"""The blind filter's chat solver against the real local model (SmolLM2 via llama.cpp): it reads the
letters' log-probabilities from a real reply, and a second run is answered from the store."""

from __future__ import annotations

import math

from benchsmith.settings import Services
from filters.solvers import ChatConfig, Query, build_solver

QUERIES = [Query("What colour is the large circle?", ("red", "blue", "green", "yellow")),
           Query("How many dogs are on the sofa?", ("1", "2", "3", "4"))]


def test_the_chat_solver_ranks_four_letters_from_a_real_model_and_a_rerun_sends_nothing(settings, local_llm, sqlite_store):
    settings = settings.model_copy(update={"services": Services(openai_base_url=local_llm.base_url)})
    config = ChatConfig(kind="openai", model=local_llm.model, use_logprobs=True, top_logprobs=10)
    solver = build_solver(config, settings=settings, store=sqlite_store)
    predictions = solver.answer(QUERIES)
    assert solver.client.http_calls == 2
    for prediction in predictions:
        assert prediction is not None and 0 <= prediction.choice < 4
        assert len(prediction.scores) == 4 and all(math.isfinite(s) for s in prediction.scores)
        assert prediction.scores[prediction.choice] == max(prediction.scores)
    again = build_solver(config, settings=settings, store=sqlite_store)
    assert again.answer(QUERIES) == predictions and again.client.http_calls == 0
