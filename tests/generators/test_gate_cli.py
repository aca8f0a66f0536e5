"""The quality gate on what an LLM really writes, through `benchsmith generate -g llm` and `benchsmith filter`
against the scripted server: a question written twice with two keys, options that are four sides, route
names that are numbers, and a misspelt key that must still be caught. What passes the gate goes on to the
blind filter; what fails it never does."""

from __future__ import annotations

import subprocess

import pytest

from benchsmith.records import normalise_text
from benchsmith.store import Store
from tests.generators.test_resume import BENCHSMITH, generate_env
from tests.filters.test_cli_and_flow import OFFLINE_PRIORS
from tests.generators.test_stage import add_oracle
from tests.support.openai_server import Reply, ScriptedOpenAI, json_completion

SIDES = ["left side", "top side", "right side", "bottom side"]
ROUTES = ["Route 59", "Route 12", "Route 33", "Route 17"]
TWICE = "What lies on the table beside the red circle?"
THINGS = ["a cup", "a plate", "a bowl", "a fork"]


def replies(request: dict) -> Reply:
    dimension = request["messages"][1]["content"].split(".")[0].removeprefix("Dimension: ")
    if dimension == "Instance Location":  # the same question twice, with two keys; and four sides
        return json_completion({"questions": [
            {"question": TWICE, "options": THINGS, "answer": "A"},
            {"question": TWICE, "options": THINGS, "answer": "B"},
            {"question": "On which side of the picture is the sun?", "options": SIDES, "answer": "C"}]})
    return json_completion({"questions": [  # routes named by numbers, and a key misspelt three times
        {"question": "Which route runs directly between Elm Park and Mill Cross?", "options": ROUTES, "answer": "A"},
        {"question": "Which route is drawn as the orange line?", "options": ROUTES, "answer": "C"},
        {"question": "What does the sign above the door say?", "options": ["COFFEE", "COFBEE", "COFFEF", "COFFE"],
         "answer": "A"}]})


@pytest.fixture(scope="module")
def generated(tmp_path_factory, oracle_dir) -> dict[str, tuple[str, str, str]]:
    """question text -> (key, the gate's failed rule or '', whether the blind filter judged it), after one
    generate and one filter."""
    tmp_path = tmp_path_factory.mktemp("gate")
    db_url = f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}"
    with Store(db_url) as store:
        add_oracle(store, oracle_dir, 1)
    with ScriptedOpenAI(replies) as server:
        env = generate_env(tmp_path / "bench", server.base_url) | {"BENCHSMITH__FILTER__BLIND__SOLVERS": OFFLINE_PRIORS}
        for command in (["generate", "-g", "llm", "-d", "instance_location", "-d", "spatial_relation"], ["filter"]):
            done = subprocess.run([BENCHSMITH, *command], env=env, cwd=tmp_path, capture_output=True, text=True,
                                  timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
    with Store(db_url) as store:
        assert store.gate_contradictions() == []
        failed = {v.subject_id: v.rule for v in store.get_verdicts(stage="quality", passed=False)}
        judged = {v.subject_id for v in store.get_verdicts(stage="blind")}
        rows = store.get_questions()
    assert len({q.text for q in rows}) == len(rows)  # one row a text: the twice-written question has one id
    return {q.text: (q.options[q.answer], failed.get(q.id, ""), q.id in judged) for q in rows}


def test_a_question_written_twice_with_two_keys_is_dropped_as_ambiguous_never_a_candidate(generated):
    _key, rule, judged = generated[TWICE]
    assert (rule, judged) == ("ambiguous_draft", False)


def test_options_that_are_four_sides_are_not_edits_of_the_key(generated):
    # about nothing the scene's facts name, so the fact check leaves it unchecked and the gate alone decides
    assert generated["On which side of the picture is the sun?"] == ("right side", "", True)


def test_route_names_that_differ_in_their_number_are_honest_options_and_a_misspelt_key_is_still_caught(generated):
    assert generated["Which route runs directly between Elm Park and Mill Cross?"] == ("Route 59", "", True)
    assert generated["Which route is drawn as the orange line?"] == ("Route 33", "", True)
    key, rule, judged = generated["What does the sign above the door say?"]
    assert (normalise_text(key), rule, judged) == ("coffee", "distractors_from_key", False)
