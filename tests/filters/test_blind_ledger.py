"""What the blind filter has judged is kept per rule and solver list: a change of solvers judges the
pending and kept questions again, never the dropped ones; an unchanged filter judges nothing twice."""

from __future__ import annotations

from benchsmith.records import Provenance, Question
from filters import blind
from filters.blind import BlindSettings
from filters.solvers import PriorConfig


def question(text: str, options: list[str], answer: int) -> Question:
    return Question(item_id="img1", dimension_id=3, text=text, options=options, answer=answer,
                    provenance=Provenance(backend="test"))


LONG_KEY = question("What is the man holding?", ["a long wooden fishing rod", "cup", "hat", "bag"], 0)
SHORT_KEY = question("What colour is the car?", ["red", "a very pale bluish grey", "light green", "dark blue"], 0)
ECHO_KEY = question("Which animal sleeps on the sofa?", ["cat", "a large brown dog", "a small bird", "a fish"], 0)


def judge(store, *kinds: str) -> dict:
    config = BlindSettings(solvers=[PriorConfig(kind=k) for k in kinds])
    return blind.counts(blind.apply(store, config, blind.solvers_from(config)))


def test_how_fast_a_solver_answers_is_not_part_of_what_was_judged():
    def key(**solver) -> str:
        config = BlindSettings.model_validate({"solvers": [{"kind": "likelihood", "model": "m", **solver}]})
        return blind.BlindStage(config, ()).config_key()

    assert key(batch_size=2, device="cpu", dtype="float16", share_prompt=False) == key()
    assert key(tie_margin=0.1) != key()


def test_swapping_a_solver_judges_exactly_the_pending_and_kept_questions(store):
    store.add_questions([LONG_KEY, SHORT_KEY], stage="generate")
    first = judge(store, "longest")
    assert (first["judged"], first["dropped"], first["kept"]) == (2, 1, 1)  # the longest option gives one away
    assert judge(store, "longest")["pending"] == 0                       # same solvers: nothing again

    store.add_questions([ECHO_KEY], stage="generate")
    swapped = judge(store, "longest", "overlap")
    assert swapped["pending"] == 2                                       # the kept one and the new one
    assert {q.id for q in store.get_questions(status="dropped")} == {LONG_KEY.id}
    assert judge(store, "longest", "overlap")["pending"] == 0
    assert len(store.ledger_rows("blind")) == 2 + 2                      # each judgement under its own key
