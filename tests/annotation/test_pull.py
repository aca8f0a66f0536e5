"""Two annotators review a scripted set through the API; a pull decides each question and measures agreement."""

from __future__ import annotations

from fractions import Fraction

import pytest
from label_studio_sdk import LabelStudio

from annotation.client import connect
from annotation.lifecycle import RULE, STAGE
from annotation.pull import pull, review_status
from annotation.push import push, questions_to_push
from annotation.settings import ReviewSettings
from benchsmith.dimensions import registry
from benchsmith.settings import load_settings
from benchsmith.store import Store
from tests.annotation.conftest import seed_questions

K, D = True, False
# question index -> (annotator 1, annotator 2); each (keep, answer index or None, dimension id, reasons)
SCRIPT = {
    0: ((K, 0, 3, ()), (K, 0, 3, ())),                          # accepted: A, dimension 3
    1: ((K, 1, 4, ()), (K, 1, 4, ())),                          # accepted with the humans' dimension 4
    2: ((K, 2, 3, ()), (K, 3, 3, ())),                          # flagged: answer
    3: ((D, 0, 3, ("ambiguous",)), (D, 0, 3, ("ambiguous", "other"))),  # rejected, with a comment
    4: ((K, 0, 3, ()), (D, 0, 3, ("bad_image",))),              # flagged: keep or discard
    5: ((K, 0, 5, ()), (K, 0, 6, ())),                          # flagged: dimension
    6: ((K, 1, 5, ()), (K, 1, 5, ())),                          # accepted
    7: ((K, 2, 5, ()), (K, 2, 5, ())),                          # accepted with C, the generator said D
    8: ((D, None, 5, ("no_correct_option",)), (D, None, 5, ("no_correct_option",))),  # rejected
    9: ((K, 0, 5, ()), None),                                   # one review of two: waits
}
DIMENSIONS = [3, 3, 3, 3, 3, 5, 5, 5, 5, 5, 5]  # question 10 is only skipped, which is no review
COMMENT = "B and C both fit"


def result(task_data: dict, keep: bool, answer: int | None, dimension_id: int, reasons: tuple[str, ...],
           review: ReviewSettings) -> list[dict]:
    def choice(name, values):
        return {"from_name": name, "to_name": "image", "type": "choices", "value": {"choices": values}}

    out = [choice("dimension", [registry().get(dimension_id).key]), choice("keep", ["Keep" if keep else "Discard"])]
    if answer is not None:
        out.append(choice("answer", [task_data["options"][answer]["value"]]))
    if reasons:
        out.append(choice("reasons", [review.discard_reasons[r] for r in reasons]))
    if "other" in reasons:
        out.append({"from_name": "comment", "to_name": "image", "type": "textarea", "value": {"text": [COMMENT]}})
    return out


@pytest.fixture
def scripted(label_studio, annotators):
    """The SCRIPT annotated by two different users, each with their own token."""
    settings = label_studio.settings(overlap=2)
    review = settings.section("review", ReviewSettings)
    store = Store(settings.db_url)
    questions = seed_questions(store, settings, DIMENSIONS)
    push(store, connect(settings), settings, registry(), questions_to_push(store, review))
    tasks = {qid: task for qid, (_, task) in store.get_review_tasks("question").items()}
    clients = [LabelStudio(base_url=label_studio.url, api_key=token) for token in annotators.values()]
    for index, by_annotator in SCRIPT.items():
        task_id = tasks[questions[index].id]
        data = clients[0].tasks.get(id=task_id).data
        for client, scripted_review in zip(clients, by_annotator):
            if scripted_review is not None:
                client.annotations.create(id=task_id, result=result(data, *scripted_review, review))
    clients[0].annotations.create(id=tasks[questions[10].id], result=[], was_cancelled=True)
    yield settings, store, questions
    store.close()


def test_pull_decides_by_majority_and_measures_agreement_as_computed_by_hand(scripted, annotators):
    settings, store, questions = scripted
    report = pull(store, connect(settings), settings, registry())

    assert report.new_reviews == 19
    assert {k: report.outcomes[k] for k in ("accepted", "rejected", "flagged", "waiting")} == {
        "accepted": 4, "rejected": 2, "flagged": 3, "waiting": 2}
    status = {q.id: q for q in store.get_questions(ids=[q.id for q in questions])}
    by_index = [status[q.id] for q in questions]
    assert [q.status for q in by_index] == ["accepted", "accepted", "in_review", "rejected", "in_review",
                                            "in_review", "accepted", "accepted", "rejected", "in_review", "in_review"]
    assert [(q.review_answer, q.review_dimension_id) for q in by_index if q.status == "accepted"] == [
        (0, 3), (1, 4), (1, 5), (2, 5)]
    assert by_index[7].answer == 3  # the generator's answer stays on record next to the human one

    verdicts = {v.subject_id: v for v in store.get_verdicts(stage=STAGE) if v.rule == RULE}
    assert verdicts[questions[3].id].details == {"reasons": ["ambiguous", "other"], "comments": [COMMENT]}
    assert verdicts[questions[8].id].reason == "discarded: no_correct_option"
    assert verdicts[questions[4].id].reason == "needs adjudication: no majority on keep or discard"
    assert verdicts[questions[5].id].details["unsettled"] == ["dimension"]
    assert {r.annotator for r in store.get_reviews()} == set(annotators)

    # Cohen's kappa, worked out from SCRIPT (pairs of annotator 1, annotator 2):
    # dimension 3, keep: KK KK KK DD KD -> p_o 4/5; marginals K 4/5 & 3/5, D 1/5 & 2/5 -> p_e 14/25 -> 6/11
    # dimension 3, answer: AA BB CD AA AA -> p_o 4/5; A 3/5 & 3/5, B 1/5 & 1/5 -> p_e 10/25 -> 2/3
    # dimension 5 (question 9 has one review, so it does not count): full agreement -> 1
    # all, keep: 8 of 9 agree; K 7/9 & 6/9, D 2/9 & 3/9 -> p_e 48/81 -> 8/11
    # all, answer: 7 of 8 agree (question 8 has no answers); A 4 & 4, B 2 & 2, C 2 & 1 -> p_e 22/64 -> 17/21
    kappas = {group: {what: a.kappa for what, a in by.items()} for group, by in report.agreement.items()}
    expected = {"3": {"keep": Fraction(6, 11), "answer": Fraction(2, 3)}, "5": {"keep": 1, "answer": 1},
                "all": {"keep": Fraction(8, 11), "answer": Fraction(17, 21)}}
    for group, by in expected.items():
        for what, value in by.items():
            assert kappas[group][what] == pytest.approx(float(value)), (group, what)
    assert {a.method for by in report.agreement.values() for a in by.values()} == {"cohen"}


def test_a_second_pull_adds_nothing_and_a_deciding_review_settles_a_flagged_question(scripted, label_studio):
    settings, store, questions = scripted
    server = connect(settings)
    pull(store, server, settings, registry())
    again = pull(store, server, settings, registry())
    assert again.pulled == again.new_reviews == 0  # no annotation version is new: no unit of the stages ran
    assert again.outcomes["accepted"] == again.outcomes["rejected"] == 0

    # the admin adjudicates question 2 (C against D) with a third review for D
    review = settings.section("review", ReviewSettings)
    task_id = store.get_review_tasks("question", [questions[2].id])[questions[2].id][1]
    data = server.client.tasks.get(id=task_id).data
    server.client.annotations.create(id=task_id, result=result(data, True, 3, 3, (), review))
    pull(store, server, settings, registry())
    settled = store.get_questions(ids=[questions[2].id])[0]
    assert (settled.status, settled.review_answer) == ("accepted", 3)

    counts, agreement, ties = review_status(store, settings)
    assert counts["accepted"] == 5 and counts["in review, flagged for adjudication"] == 2 == len(ties)
    assert counts["tasks in Label Studio"] == len(questions)
    assert agreement["all"]["keep"].method == "fleiss"  # question 2 now has three raters


def test_a_revised_annotation_is_pulled_once_and_decides_its_question_again(scripted, label_studio, annotators):
    settings, store, questions = scripted
    server = connect(settings)
    assert pull(store, server, settings, registry()).pulled == 19

    # the first annotator, who kept question 4 where the second discarded it, now discards it too
    first = LabelStudio(base_url=label_studio.url, api_key=next(iter(annotators.values())))
    task_id = store.get_review_tasks("question", [questions[4].id])[questions[4].id][1]
    me = first.users.whoami().id
    (mine,) = [a for a in first.annotations.list(id=task_id) if a.completed_by == me]
    data = first.tasks.get(id=task_id).data
    first.annotations.update(id=mine.id, result=result(data, False, 0, 3, ("bad_image",),
                                                       settings.section("review", ReviewSettings)))
    revised = pull(store, server, settings, registry())
    assert (revised.pulled, revised.new_reviews, revised.outcomes["rejected"], revised.outcomes["flagged"]) == (1, 1, 1, 2)
    assert store.get_questions(ids=[questions[4].id])[0].status == "rejected"
    assert pull(store, server, settings, registry()).pulled == 0


def test_a_changed_overlap_decides_again_every_question_with_reviews(scripted, label_studio):
    settings, store, questions = scripted
    server = connect(settings)
    pull(store, server, settings, registry())
    review = settings.section("review", ReviewSettings)
    one = load_settings(env=label_studio.env | {"BENCHSMITH_WORKSPACE": str(settings.workspace),
                                                "BENCHSMITH__REVIEW__PROJECT": review.project,
                                                "BENCHSMITH__REVIEW__OVERLAP": "1"})
    again = pull(store, server, one, registry())
    assert (again.pulled, again.new_reviews) == (19, 0)  # every first-round review, under the new key
    assert again.outcomes["accepted"] == 1  # question 9, waiting for a second review, is kept on its one
    assert store.get_questions(ids=[questions[9].id])[0].status == "accepted"
    assert pull(store, server, one, registry()).pulled == 0


def test_the_signal_counts_changed_answers_and_discards_per_dimension_and_generator(scripted):
    from annotation.signal import review_signal

    settings, store, _questions = scripted
    pull(store, connect(settings), settings, registry())
    rows = {(row[0], row[1]): row[2:] for row in review_signal(store, registry())}
    # dimension 3: 0 and 1 kept with the generator's answer (1 moved to dimension 4), 3 discarded
    assert rows[("3 Instance Attributes", "template")] == [3, "0 (0%)", "1 (50%)", "1 (33%)", "ambiguous 1, other 1"]
    # dimension 5: 6 and 7 kept with another answer than the generator's key, 8 discarded
    assert rows[("5 Instances Counting", "template")] == [3, "2 (100%)", "0 (0%)", "1 (33%)", "no_correct_option 1"]
    assert rows[("all", "all")][:4] == [6, "2 (50%)", "1 (25%)", "2 (33%)"]
