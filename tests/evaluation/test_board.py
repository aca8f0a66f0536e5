"""The board and the item analysis on crafted predictions, checked against values worked out by hand."""

import math

import pytest

from evaluation.board import bootstrap_interval, collect, leaderboard
from evaluation.items import STAGE, flag_verdicts, item_table
from evaluation.records import EvalQuestion
from evaluation.sources import Source

QUESTIONS = [EvalQuestion(f"q{i}", f"question {i}?", ("a", "b", "c", "d"), answer, dimension, content_hash=f"h{i}")
             for i, (answer, dimension) in enumerate([(0, "dim_a"), (2, "dim_a"), (1, "dim_b"), (3, "dim_b")], 1)]
SOURCE = Source("release:v9", QUESTIONS)


def record(store, model: str, answers: dict[str, int | None], *, adapter="likelihood", protocol="single",
           passes: dict[str, list[int | None]] | None = None) -> None:
    """A run whose choice per question is `answers` (None: the reply matched no option)."""
    store.add_eval_run({"id": f"run-{model}-{protocol}", "model": model, "adapter": adapter, "source": SOURCE.label,
                        "protocol": protocol, "config": {}})
    rows = []
    for q in QUESTIONS:
        for k, choice in enumerate((passes or {}).get(q.question_id, [answers.get(q.question_id, -1)])):
            if choice == -1:
                continue
            rows.append({"run_id": f"run-{model}-{protocol}", "subject": f"{q.question_id}:{q.content_hash}:p{k}",
                         "question_id": q.question_id, "pass_key": f"p{k}", "dimension": q.dimension,
                         "option_order": [0, 1, 2, 3], "template": 0, "answer": q.answer, "choice": choice,
                         "correct": choice == q.answer, "status": "ok" if choice is not None else "unmatched",
                         "matched_by": "letter", "raw": "", "scores": [], "votes": [], "reason": ""})
    store.add_predictions(rows)


@pytest.fixture
def evaluated(store):
    record(store, "m1", {"q1": 0, "q2": 2, "q3": 1, "q4": 1})
    record(store, "m2", {"q1": 0, "q2": 3, "q3": None, "q4": 1})
    record(store, "m3", {"q1": 1, "q2": 3, "q3": 1, "q4": 1})
    record(store, "blind", {"q1": 0, "q2": 0, "q3": 0, "q4": 0}, adapter="blind")
    return store


def test_board_accuracy_per_dimension_and_overall(evaluated):
    board = leaderboard(collect(evaluated, SOURCE), SOURCE, resamples=200)
    rows = {row["model"]: row for row in board.rows}
    assert [r["model"] for r in board.rows] == ["m1", "m2", "m3", "blind"]  # models by score, baselines last
    m1 = rows["m1"]
    assert m1["overall"] == 0.75 and m1["questions"] == 4 and m1["format_hit"] == 1.0
    assert m1["dimensions"]["dim_a"] == {"accuracy": 1.0, "n": 2, "ci": [1.0, 1.0]}
    assert m1["dimensions"]["dim_b"]["accuracy"] == 0.5
    assert rows["m2"]["overall"] == 0.25 and rows["m2"]["format_hit"] == 0.75  # the miss counts as wrong
    assert rows["blind"]["blind"] and rows["blind"]["overall"] == 0.25
    low, high = m1["overall_ci"]
    assert 0 <= low <= 0.75 <= high <= 1


def test_instability_is_the_mean_entropy_of_each_questions_choices(store):
    record(store, "m1", {}, protocol="instability",
           passes={"q1": [0, 0, 0, 0], "q2": [2, 2, 0, None], "q3": [1, 2, 3, 0], "q4": [3, 3, 3, 1]})
    [row] = leaderboard(collect(store, SOURCE), SOURCE, resamples=200).rows
    h = lambda *ps: -sum(p * math.log(p) for p in ps)  # noqa: E731
    expected = (0 + h(0.5, 0.25, 0.25) + h(0.25, 0.25, 0.25, 0.25) + h(0.75, 0.25)) / 4
    assert math.isclose(row["instability"], expected)
    assert math.isclose(row["overall"], (1 + 0.5 + 0.25 + 0.75) / 4)  # share of right passes per question


def test_answers_to_an_older_wording_are_not_counted(evaluated):
    changed = Source(SOURCE.label, [QUESTIONS[0].__class__(**{**QUESTIONS[0].__dict__, "content_hash": "new"}),
                                    *QUESTIONS[1:]])
    rows = {r["model"]: r for r in leaderboard(collect(evaluated, changed), changed, resamples=200).rows}
    assert rows["m1"]["questions"] == 3 and rows["m1"]["of"] == 4


def test_item_analysis_flags_and_discrimination(evaluated):
    items = item_table(collect(evaluated, SOURCE)).set_index("question_id")
    assert items.loc["q4", "flags"] == "same_wrong_option;no_model_beats_chance"
    assert items.loc["q4", "common_wrong_choice"] == 1
    assert items.loc["q1", "flags"] == "blind_right" and items.loc["q1", "blind_right"] == "blind"
    assert items.loc["q2", "flags"] == ""                 # two models agree on a wrong option, one is right
    assert items.loc["q2", "difficulty"] == pytest.approx(1 / 3)
    assert items.loc["q2", "discrimination"] == pytest.approx(1.0)   # only the best model gets it
    assert items.loc["q1", "discrimination"] == pytest.approx(0.0)
    assert items.loc["q3", "choices"] == "m1=B;m2=-;m3=B"   # m2's reply matched no option
    flags = flag_verdicts(items.reset_index(), SOURCE.label, [])
    assert {(v.subject_id, v.rule, v.passed) for v in flags} == {
        ("q1", "blind_right", False), ("q4", "same_wrong_option", False), ("q4", "no_model_beats_chance", False)}
    assert {v.subject_id: v.details for v in flags} == {
        "q1": {"source": SOURCE.label, "key": "A", "choices": {"m1": "A", "m2": "A", "m3": "B"},
               "blind_right": ["blind"]},
        "q4": {"source": SOURCE.label, "key": "D", "choices": {"m1": "B", "m2": "B", "m3": "B"},
               "blind_right": []}}


def test_a_later_analysis_clears_the_flags_it_no_longer_raises_and_keeps_them_on_record(evaluated):
    first = flag_verdicts(item_table(collect(evaluated, SOURCE)), SOURCE.label, [])
    evaluated.add_verdicts(first)
    record(evaluated, "m4", {"q1": 0, "q2": 2, "q3": 1, "q4": 3})     # a fourth model gets q4 right
    standing = evaluated.get_verdicts(stage=STAGE, passed=False)
    evaluated.add_verdicts(flag_verdicts(item_table(collect(evaluated, SOURCE)), SOURCE.label, standing))
    after = {(v.subject_id, v.rule): v.passed for v in evaluated.get_verdicts(stage=STAGE)}
    assert after == {("q1", "blind_right"): False, ("q4", "same_wrong_option"): True,
                     ("q4", "no_model_beats_chance"): True}


def test_one_model_under_two_protocols_counts_once(store):
    """Its ordinary mistakes are not the agreement of two models: nothing looks mis-keyed."""
    record(store, "m1", {"q1": 0, "q2": 2, "q3": 1, "q4": 1})
    record(store, "m1", {"q1": 0, "q2": 2, "q3": 1, "q4": 1}, protocol="circular")
    record(store, "m2", {"q1": 1, "q2": 2, "q3": 1, "q4": 3}, protocol="circular")
    items = item_table(collect(store, SOURCE)).set_index("question_id")
    assert "same_wrong_option" not in items.loc["q4", "flags"]
    assert items.loc["q4", "models"] == 2 and items.loc["q4", "choices"] == "m1=B;m2=D"
    assert items.loc["q1", "runs"] == "m1=single;m2=circular"   # which run each model was read from
    assert items.loc["q1", "difficulty"] == pytest.approx(0.5)


def test_bootstrap_interval_narrows_with_more_questions():
    import numpy as np

    few = bootstrap_interval(np.array([1.0, 0.0] * 5), 2000)
    many = bootstrap_interval(np.array([1.0, 0.0] * 500), 2000)
    assert few[0] < many[0] < 0.5 < many[1] < few[1]
    assert many[1] - many[0] == pytest.approx(2 * 1.96 * math.sqrt(0.25 / 1000), rel=0.15)
