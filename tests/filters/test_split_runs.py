"""A question's blind verdict does not depend on how the filter's runs were split: the same store filtered
by `benchsmith filter` in one run and in three (`--limit`) gets identical verdicts, the learned solver's
scores included, though the first part drops questions the later parts' learners would otherwise miss."""

from __future__ import annotations

import sqlalchemy as sa
from typer.testing import CliRunner

from benchsmith.records import Provenance, Question
from benchsmith.store import Store
from tests.filters.solvers.test_learned import leaky_pool

SOLVERS = '[{kind: learned, min_pool: 50, hash_bits: 10}, {kind: longest, tie_margin: 0.5}]'
QUESTIONS = [Question(item_id=q.group, dimension_id=5 if "wheels" in q.text else 3, text=q.text,
                      options=list(q.options), answer=q.answer, provenance=Provenance(backend="test"))
             for q in leaky_pool(60)]


def filtered(workspace, *limits: int) -> list[tuple]:
    """Every blind verdict (subject, passed, details) and question status after `filter` ran once per limit."""
    from flows.app import app

    env = {"BENCHSMITH_WORKSPACE": str(workspace), "BENCHSMITH__FILTER__BLIND__SOLVERS": SOLVERS}
    with Store(f"sqlite:///{workspace / 'benchsmith.db'}") as store:
        store.add_questions(QUESTIONS, stage="generate")
    for limit in limits:
        result = CliRunner().invoke(app, ["filter", "--limit", str(limit)], env=env)
        assert result.exit_code == 0, result.output
    with Store(f"sqlite:///{workspace / 'benchsmith.db'}") as store:
        with store.engine.connect() as conn:
            verdicts = sorted((s, p, d) for s, p, d in conn.execute(sa.text(
                "SELECT subject_id, passed, details FROM verdicts WHERE stage = 'blind'")))
        statuses = sorted((q.id, q.status) for q in store.get_questions())
    return [verdicts, statuses]


def test_the_same_store_filtered_in_one_run_and_in_three_gets_identical_verdicts(tmp_path):
    whole = filtered(tmp_path / "one", len(QUESTIONS))
    verdicts, statuses = whole
    assert len(verdicts) == len(QUESTIONS)
    assert sum(status == "dropped" for _id, status in statuses) >= 40  # the first part drops much of the pool
    assert filtered(tmp_path / "three", 40, 40, 40) == whole
