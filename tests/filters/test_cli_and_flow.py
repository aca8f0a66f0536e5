"""`benchsmith filter` and the filter stage, end to end with the local profile's offline solvers."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from benchsmith.records import Provenance, Question
from benchsmith.store import Store

LEAKED = Question(item_id="img1", dimension_id=9, text="The sign reads 'bakery'. What does the sign say?",
                  options=["pharmacy", "bakery", "library", "garage"], answer=1, provenance=Provenance(backend="t"))
FAIR = Question(item_id="img1", dimension_id=5, text="How many circles are there?",
                options=["2", "3", "4", "5"], answer=2, provenance=Provenance(backend="t"))
OFFLINE_PRIORS = '[{kind: longest, tie_margin: 0.5}, {kind: overlap}, {kind: odd_one_out}]'


def cli(settings, *args: str):
    from flows.app import app

    env = {"BENCHSMITH_WORKSPACE": str(settings.workspace), "BENCHSMITH__FILTER__BLIND__SOLVERS": OFFLINE_PRIORS}
    return CliRunner().invoke(app, list(args), env=env)


def add(settings, *questions: Question) -> None:
    with Store(settings.db_url) as store:
        store.add_questions(list(questions), stage="generate")


def test_filter_command_drops_the_leak_and_reports(settings):
    add(settings, LEAKED, FAIR)
    result = cli(settings, "filter", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["run"] == {"pending": 2, "judged": 2, "dropped": 1, "kept": 1, "unanswered": 0}
    assert out["report"]["dimensions"]["9"]["drop_rate"] == 1.0
    assert out["report"]["accuracy_after"]["overlap"] == 0.25
    with Store(settings.db_url) as store:
        [dropped] = store.get_questions(status="dropped")
        [verdict] = store.get_verdicts(stage="blind", subject_id=dropped.id)
    assert dropped.text == LEAKED.text and verdict.rule == "mmstar" and "overlap" in verdict.reason

    again = cli(settings, "filter")
    assert again.exit_code == 0 and "judged 0" in again.output
    assert "Blind accuracy" in again.output and "Visual Reasoning" not in again.output


def test_filter_without_solvers_is_a_clear_error(settings):
    from flows.app import app

    env = {"BENCHSMITH_WORKSPACE": str(settings.workspace), "BENCHSMITH__FILTER__BLIND__SOLVERS": "[]"}
    result = CliRunner().invoke(app, ["filter"], env=env)
    assert result.exit_code != 0
    assert "filter.blind.solvers is empty" in str(result.exception)


def test_the_filter_stage_judges_only_new_questions(prefect_api, settings):
    from benchsmith.settings import load_settings
    from flows.filter import filter_flow

    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(settings.workspace),
                                  "BENCHSMITH__FILTER__BLIND__SOLVERS": OFFLINE_PRIORS})
    add(settings, LEAKED)
    assert filter_flow(settings)["blind"]["dropped"] == 1
    add(settings, FAIR)
    assert filter_flow(settings)["blind"] == {"pending": 1, "judged": 1, "dropped": 0, "kept": 1, "unanswered": 0}


def test_report_only_judges_nothing(settings):
    add(settings, LEAKED)
    result = cli(settings, "filter", "--report-only", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"run": None, "report": {
        "dimensions": {}, "solvers": [], "accuracy_before": {}, "accuracy_after": {}}}
