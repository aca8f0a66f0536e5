"""The blind filter: rotations, drop rules, verdicts in the store, and the report rebuilt from them."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from benchsmith import runner
from benchsmith.records import Provenance, Question
from filters import blind
from filters.blind import BlindSettings, answer_rotated, judge_questions, report
from filters.solvers import PriorConfig, Prediction, Query, choose
from filters.solvers.priors import PriorSolver


class FixedSolver:
    """A solver that always prefers the option with a given text: it knows the answer when that text is right."""

    def __init__(self, name: str, favourite: dict[str, str]) -> None:
        self.name = name
        self.favourite = favourite

    def answer(self, queries: Sequence[Query]) -> list[Prediction]:
        out = []
        for q in queries:
            scores = [1.0 if o == self.favourite.get(q.text) else 0.0 for o in q.options]
            out.append(Prediction(choose(scores), tuple(scores)))
        return out

    def release(self) -> None:
        pass


def question(text: str, options: list[str], answer: int, dimension: int = 3) -> Question:
    return Question(item_id="img1", dimension_id=dimension, text=text, options=options, answer=answer,
                    provenance=Provenance(backend="test"))


def test_rotation_maps_choices_back_to_the_original_options():
    q = Query("Which?", ("a", "b", "c", "d"))
    favours_c = FixedSolver("f", {"Which?": "c"})
    [answered] = answer_rotated(favours_c, [q], rotations=4)
    assert answered["choices"] == [2, 2, 2, 2]
    assert answered["scores"] == [0.0, 0.0, 1.0, 0.0]


def test_a_tie_broken_by_position_knows_nothing():
    q = Query("How many circles are there?", ("2", "3", "4", "5"))
    [answered] = answer_rotated(PriorSolver(PriorConfig(kind="longest")), [q], rotations=4)
    assert answered["choices"] == [0, 1, 2, 3]  # always the first option shown
    assert blind.outcome(1, answered) == {**answered, "right": 0.25, "knows": False}


def test_one_rotation_lets_a_positional_guess_count_as_knowing():
    q = Query("How many circles are there?", ("2", "3", "4", "5"))
    [answered] = answer_rotated(PriorSolver(PriorConfig(kind="longest")), [q], rotations=1)
    assert blind.outcome(0, answered)["knows"]


QUESTIONS = [
    question("What colour is the car?", ["red", "blue", "green", "grey"], 0),
    question("Where is the dog?", ["left", "right", "top", "bottom"], 1),
    question("How many cats?", ["1", "2", "3", "4"], 2),
]
# solver one knows questions 0 and 1, solver two knows 0 only, solver three favours a wrong option on 2
SOLVERS = [FixedSolver("one", {"What colour is the car?": "red", "Where is the dog?": "right"}),
           FixedSolver("two", {"What colour is the car?": "red", "How many cats?": "1"}),
           FixedSolver("three", {"What colour is the car?": "red", "Where is the dog?": "right"})]


def test_seed_rule_drops_only_what_every_solver_knows():
    verdicts = judge_questions(QUESTIONS, SOLVERS, BlindSettings(rule="seed"))
    assert [v.passed for v in verdicts] == [False, True, True]
    assert verdicts[0].rule == "seed"
    assert "3 of 3" in verdicts[0].reason and "one, two, three" in verdicts[0].reason


@pytest.mark.parametrize(("max_right", "passed"), [(0, [False, False, True]), (1, [False, False, True]),
                                                   (2, [False, True, True])])
def test_mmstar_rule_drops_when_more_than_k_solvers_know(max_right, passed):
    verdicts = judge_questions(QUESTIONS, SOLVERS, BlindSettings(rule="mmstar", max_right=max_right))
    assert [v.passed for v in verdicts] == passed


def test_a_verdict_names_every_solvers_prediction():
    verdict = judge_questions(QUESTIONS[2:], SOLVERS, BlindSettings())[0]
    assert set(verdict.details["solvers"]) == {"one", "two", "three"}
    assert verdict.details["solvers"]["two"]["choices"] == [0, 0, 0, 0]
    assert verdict.details["solvers"]["two"]["right"] == 0.0
    assert verdict.details["knowing"] == []


def test_apply_drops_keeps_records_and_never_judges_twice(store):
    store.add_questions(QUESTIONS, stage="generate")
    config = BlindSettings(rule="mmstar", max_right=1, chunk_size=2)
    run = blind.apply(store, config, SOLVERS)
    assert blind.counts(run) == {"pending": 3, "judged": 3, "dropped": 2, "kept": 1, "unanswered": 0}
    assert {q.text for q in store.get_questions(status="dropped")} == {"What colour is the car?", "Where is the dog?"}
    [kept] = store.get_questions(status="candidate")
    assert [v.passed for v in store.get_verdicts(stage="blind", subject_id=kept.id)] == [True]
    dropped_id = QUESTIONS[0].id
    [event] = [e for e in store.events(dropped_id) if e["to_status"] == "dropped"]
    assert event["stage"] == "blind"
    assert blind.apply(store, config, SOLVERS).pending == 0


class Learner(FixedSolver):
    """A solver that learns from the pool: it records each pool it was fitted on."""

    def __init__(self) -> None:
        super().__init__("learner", {})
        self.fitted: list[list[str]] = []

    def fit(self, labelled) -> None:
        self.fitted.append(sorted(q.text for q in labelled))


def test_listing_the_blind_stages_work_trains_nothing_and_a_run_trains_once_on_the_pool(store):
    store.add_questions(QUESTIONS, stage="generate")
    learner, config = Learner(), BlindSettings(chunk_size=1)
    stage = blind.BlindStage(config, [learner])
    assert len(runner.pending(stage, store)) == 3 and len(stage.units(runner.StageContext(store))) == 3
    assert learner.fitted == []
    blind.apply(store, config, [learner])
    assert learner.fitted == [sorted(q.text for q in QUESTIONS)]  # once, before the first chunk


class FailingOnce:
    """Answers nothing on its first call (like an endpoint that failed after its retries), then knows all."""

    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    def answer(self, queries):
        self.calls += 1
        if self.calls == 1:
            return [None] * len(queries)
        return [Prediction(0, (1.0, 0.0, 0.0, 0.0)) for _ in queries]

    def release(self) -> None:
        pass


def test_questions_a_solver_could_not_answer_wait_for_the_next_run(store):
    store.add_questions(QUESTIONS[:1], stage="generate")
    flaky = FailingOnce()
    first = blind.apply(store, BlindSettings(rotations=1), [flaky])
    assert blind.counts(first) == {"pending": 1, "judged": 0, "dropped": 0, "kept": 0, "unanswered": 1}
    assert store.get_verdicts(stage="blind") == []
    second = blind.apply(store, BlindSettings(rotations=1), [flaky])
    assert second.counters["dropped"] == 1


def test_report_compares_accuracy_before_and_after_with_chance(store):
    questions = QUESTIONS + [question("What is written on the sign?", ["stop", "go", "exit", "open"], 3, dimension=9)]
    store.add_questions(questions, stage="generate")
    blind.apply(store, BlindSettings(rule="mmstar", max_right=1), SOLVERS)
    result = report(store)
    assert result.judged == {3: 3, 9: 1}
    assert result.drop_rate(3) == pytest.approx(2 / 3)
    assert result.drop_rate(9) == 0
    assert result.chance == {3: 0.25, 9: 0.25}
    rows = {(r["dimension_id"], r["solver"]): r for r in result.solver_rows()}
    # solver one: right on questions 0 and 1 always; on 2 a four-way tie is right in 1 of 4 rotations
    assert rows[(3, "one")]["accuracy_before"] == pytest.approx((1 + 1 + 0.25) / 3)
    assert rows[(3, "one")]["accuracy_after"] == pytest.approx(0.25)
    assert rows[(3, "two")]["accuracy_after"] == 0.0
    assert rows[(3, "one")]["n_after"] == 1
    assert result.as_dict()["accuracy_after"]["one"] == pytest.approx(0.25)
    # over every dimension: 4 questions before, of which solver one was right on 1 + 1 + 0.25 + its share on 9
    overall = {r["solver"]: r for r in result.solver_rows() if r["dimension_id"] is None}
    assert overall["one"]["n_before"] == 4 and overall["one"]["chance"] == 0.25
    low, high = overall["one"]["ci95_before"]
    assert low < overall["one"]["accuracy_before"] < high


def test_solver_names_must_be_unique():
    from benchsmith.settings import SettingsError

    config = BlindSettings(solvers=[{"kind": "longest"}, {"kind": "longest"}])
    with pytest.raises(SettingsError, match="repeated: longest"):
        blind.solvers_from(config)


@pytest.mark.parametrize(("profile", "kinds"), [("local", {"longest", "overlap", "odd_one_out", "embedding",
                                                            "centroid", "learned", "real_word"}),
                                                ("gpu", {"likelihood", "learned", "real_word"})])
def test_each_profile_ships_a_working_solver_list(profile, kinds):
    from benchsmith.settings import load_settings

    config = blind.blind_settings(load_settings(profile=profile, env={}))
    assert {s.kind for s in config.solvers} == kinds
    assert len(blind.solvers_from(config)) == len(config.solvers)  # built lazily: no model loads here


def test_bad_blind_settings_name_the_key():
    from benchsmith.settings import SettingsError, load_settings

    env = {"BENCHSMITH__FILTER__BLIND__RULE": "majority"}
    with pytest.raises(SettingsError, match="filter.blind.rule"):
        blind.blind_settings(load_settings(env=env))
