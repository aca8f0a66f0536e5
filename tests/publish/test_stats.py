"""Question statistics at any stage: small frames in, exact tables and real PNG plots out."""

from __future__ import annotations

import pytest
from PIL import Image as PILImage

from publish import stats
from benchsmith.records import Image, Provenance, Question

PROV = Provenance(backend="programmatic")


def question(n: int, dimension: int, answer: int) -> Question:
    return Question(item_id="i" * 64, dimension_id=dimension, text=f"How many things, case {n}?",
                    options=["1", "2", "3", "4"], answer=answer, provenance=PROV)


@pytest.fixture
def staged(store):
    """Eight questions: 2 left as candidates, 1 dropped, 1 in review, 1 rejected, 2 accepted, 1 published;
    one accepted question was moved by its annotators from dimension 5 to 2 and its answer set to D."""
    store.add_items([Image(id="i" * 64, path="ii/x.png", width=64, height=64)])
    qs = [question(n, 5 if n < 6 else 9, n % 3) for n in range(8)]
    store.add_questions(qs, stage="generate")
    ids = [q.id for q in qs]
    store.move("question", ids[2:3], "dropped", stage="filter")
    store.move("question", ids[3:], "in_review", stage="review")
    store.move("question", ids[4:5], "rejected", stage="review")
    store.update_reviewed("question", {ids[5]: {"review_dimension_id": 2, "review_answer": 3}})
    store.move("question", ids[5:], "accepted", stage="review")
    store.move("question", ids[7:], "published", stage="publish", reason="v1")
    return store


def test_the_frame_carries_the_reviewed_dimension_and_answer(staged):
    frame = stats.question_frame(staged)
    assert len(frame) == 8
    moved = frame[frame["status"] == "accepted"].sort_values("dimension_id").iloc[0]
    assert (moved["dimension_id"], moved["category"], moved["answer"]) == (2, "Instance Identity", "D")


def test_the_funnel_counts_how_far_questions_got(staged):
    funnel = stats.funnel(stats.question_frame(staged))
    assert funnel.to_dict("list") == {"step": ["generated", "passed quality", "passed blind filter",
                                               "accepted in review", "published"], "count": [8, 8, 5, 3, 1]}


def test_counts_and_answer_balance_follow_the_chosen_statuses(staged):
    frame = stats.question_frame(staged)
    tables = stats.stats_tables(frame, ["accepted", "published"])
    assert tables["dimension_counts"].to_dict("list") == {"dimension_id": [2, 9], "category": [
        "Instance Identity", "Text Understanding"], "count": [1, 2]}
    balance = tables["answer_balance"]
    assert balance["answer"].tolist() == list("ABCD") and balance["count"].sum() == 3
    assert balance.set_index("answer")["count"]["D"] == 1
    assert balance["share"].sum() == pytest.approx(1.0, abs=1e-3)  # shares are rounded to 4 places
    status = tables["status_by_dimension"].set_index("dimension_id")
    assert list(status.columns[1:]) == stats.STATUSES
    assert status.loc[5, ["candidate", "dropped", "in_review", "rejected"]].tolist() == [2, 1, 1, 1]


def test_write_stats_saves_every_table_and_the_three_plots(staged, tmp_path):
    written = stats.write_stats(stats.stats_tables(stats.question_frame(staged)), tmp_path / "out")
    names = sorted(p.name for p in written)
    assert names == sorted(["status_by_dimension.csv", "funnel.csv", "dimension_counts.csv", "answer_balance.csv",
                            "dimension_counts.png", "funnel.png", "answer_balance.png"])
    for png in (p for p in written if p.suffix == ".png"):
        with PILImage.open(png) as img:
            assert img.format == "PNG" and min(img.size) > 100
            assert "Software" not in img.info


def test_an_empty_store_gives_empty_tables_not_errors(store, tmp_path):
    tables = stats.stats_tables(stats.question_frame(store))
    assert tables["funnel"]["count"].tolist() == [0, 0, 0, 0, 0]
    assert tables["answer_balance"]["share"].tolist() == [0.0] * 4
    assert len(stats.write_stats(tables, tmp_path)) == 7
