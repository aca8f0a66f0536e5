"""The likelihood solver on tiny random models, saved to disk and loaded through the production path."""

from __future__ import annotations

import pytest

from filters.blind import BlindSettings, answer_rotated, judge_questions
from filters.solvers import LikelihoodConfig, Query, build_solver
from filters.solvers.likelihood import LikelihoodSolver
from tests.filters.solvers.tiny_models import save_tiny_causal, save_tiny_gpt2, save_tiny_t5

QUERIES = [
    Query("What colour is the large circle?", ("red", "blue and green", "yellow", "a purple hexagon shape")),
    Query("How many squares are there?", ("one", "two", "three four five", "six")),
    Query("Where is the star?", ("top left", "bottom right corner of it", "middle", "next to the hexagon")),
]

MAKERS = {"llama": save_tiny_causal, "gpt2": save_tiny_gpt2, "t5": save_tiny_t5}


@pytest.fixture(scope="module", params=sorted(MAKERS))
def tiny_model(request, tmp_path_factory):
    return MAKERS[request.param](tmp_path_factory.mktemp(request.param))


def solver(path, **options) -> LikelihoodSolver:
    return build_solver(LikelihoodConfig(kind="likelihood", model=str(path), **options))


def test_batched_padded_scores_equal_one_question_at_a_time(tiny_model):
    batched = solver(tiny_model, batch_size=8, normalise="sum").answer(QUERIES)
    single = [solver(tiny_model, batch_size=1, normalise="sum").answer([q])[0] for q in QUERIES]
    for b, s in zip(batched, single):
        assert b.scores == pytest.approx(s.scores, abs=1e-4)
        assert b.choice == s.choice


def test_sharing_the_prompt_changes_no_score(tiny_model):
    shared = solver(tiny_model, share_prompt=True).answer(QUERIES)
    joined = solver(tiny_model, share_prompt=False).answer(QUERIES)
    for a, b in zip(shared, joined):
        assert a.scores == pytest.approx(b.scores, abs=1e-4)


def test_mean_normalisation_divides_by_the_option_token_count(tiny_model):
    total = solver(tiny_model, normalise="sum")
    mean = solver(tiny_model, normalise="mean")
    total_scores = total.answer(QUERIES[:1])[0].scores
    mean_scores = mean.answer(QUERIES[:1])[0].scores
    model_is_seq2seq = total.model.config.is_encoder_decoder
    for option, t, m in zip(QUERIES[0].options, total_scores, mean_scores):
        ids = total.tokenizer(option if model_is_seq2seq else " " + option,
                              add_special_tokens=model_is_seq2seq)["input_ids"]
        assert m == pytest.approx(t / len(ids), abs=1e-4)
        assert t < 0


def test_an_unknown_model_is_a_clear_error(tmp_path):
    from benchsmith.errors import BenchsmithError

    with pytest.raises(BenchsmithError, match="blind solver '.*': model folder .*no-such-model does not exist"):
        solver(tmp_path / "no-such-model").answer(QUERIES[:1])


def fit_to_prefer(path, query: Query, favourite: str, steps: int = 60) -> None:
    """Train the saved model a few steps on 'prompt + favourite' so it clearly prefers that option."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, AutoConfig

    seq2seq = AutoConfig.from_pretrained(path).is_encoder_decoder
    model = (AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM).from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    prompt = LikelihoodConfig(kind="likelihood", model="x").prompt.format(question=query.text)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        if seq2seq:
            batch = tokenizer([prompt], return_tensors="pt")
            loss = model(**batch, labels=tokenizer([favourite], return_tensors="pt")["input_ids"]).loss
        else:
            ids = tokenizer([prompt + " " + favourite], return_tensors="pt")["input_ids"]
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    model.save_pretrained(path)


def test_a_model_fitted_to_one_option_picks_it_under_every_rotation(tmp_path, tiny_model):
    from benchsmith.records import Provenance, Question

    import shutil

    fitted = shutil.copytree(tiny_model, tmp_path / "fitted")
    query = QUERIES[0]
    favourite = 2  # "yellow"
    before = solver(fitted).answer([query])[0]
    fit_to_prefer(fitted, query, query.options[favourite])
    fitted_solver = solver(fitted)
    after = fitted_solver.answer([query])[0]
    assert after.choice == favourite
    assert after.scores[favourite] - max(s for i, s in enumerate(after.scores) if i != favourite) > 1.0
    assert after.scores != before.scores
    [rotated] = answer_rotated(fitted_solver, [query], rotations=4)
    assert rotated["choices"] == [favourite] * 4

    as_question = Question(item_id="i", dimension_id=3, text=query.text, options=list(query.options),
                           answer=favourite, provenance=Provenance(backend="test"))
    wrong = as_question.model_copy(update={"answer": 0})
    dropped, kept = judge_questions([as_question, wrong], [fitted_solver], BlindSettings(rule="seed"))
    assert not dropped.passed and dropped.details["solvers"][fitted_solver.name]["knows"]
    assert kept.passed and kept.details["solvers"][fitted_solver.name]["right"] == 0.0
