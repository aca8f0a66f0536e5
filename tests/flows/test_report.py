"""The run report's blind-accuracy table: every solver per dimension, before and after the filter, with
95% Wilson intervals beside chance."""

from __future__ import annotations

from collections.abc import Sequence

from benchsmith.records import Provenance, Question
from flows.report import write_report
from benchsmith.store import Store
from filters import blind
from filters.blind import BlindSettings
from filters.solvers import Prediction, Query


class Favourite:
    """Picks its favourite option wherever it is shown; otherwise every option ties (the first shown wins)."""

    def __init__(self, name: str, favourite: str) -> None:
        self.name, self.favourite = name, favourite

    def answer(self, queries: Sequence[Query]) -> list[Prediction]:
        out = []
        for query in queries:
            scores = tuple(float(o == self.favourite) for o in query.options)
            out.append(Prediction(max(range(4), key=lambda i: (scores[i], -i)), scores))
        return out

    def release(self) -> None:
        pass


def test_the_report_shows_each_solvers_blind_accuracy_with_intervals_before_and_after(tmp_path):
    colours = ["red", "blue", "green", "white"]
    questions = [Question(item_id=f"img{i}", dimension_id=3, text=f"What colour is shape {i}?", options=colours,
                          answer=answer, provenance=Provenance(backend="test"))
                 for i, answer in enumerate([0, 0, 1, 2])]
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.add_questions(questions, stage="generate")
        blind.apply(store, BlindSettings(rule="mmstar", max_right=0), [Favourite("red-lover", "red")])
        report = write_report(store, tmp_path / "report").read_text()
    # right on the two red keys under every order, never on the other two: 2 of 4 before, 0 of the 2 kept after;
    # Wilson 95%: 2/4 -> 15.0%-85.0%, 0/2 -> 0.0%-65.8%
    assert ("| Instance Attributes | red-lover | 25% | 4 | 50.0% (15.0%–85.0%) | 2 | 0.0% (0.0%–65.8%) |"
            in report)
    assert "| all dimensions | red-lover | 25% | 4 | 50.0% (15.0%–85.0%) | 2 | 0.0% (0.0%–65.8%) |" in report
    assert "95% Wilson intervals" in report


def test_the_report_token_follows_what_the_report_shows_not_stage_timings_or_its_own_ledger(store):
    from benchsmith.records import Image
    from flows.report import content_token

    before = content_token(store)
    store.finish_stage(store.start_stage("run1", "extract"), status="done", stats={})
    store.record_work("report", "any key", [{"subject": "report", "status": "done"}])
    assert content_token(store) == before
    store.record_work("blind", "any key", [{"subject": "q1", "status": "failed", "reason": "crashed"}])
    assert content_token(store) != before  # failures by reason are in the report
    after_failure = content_token(store)
    store.add_items([Image(id="e" * 64, path="e.png", width=64, height=64)])
    assert content_token(store) != after_failure
