"""The judge ensemble: votes read from judgements, the majority rule, and a free-text model graded
through the scripted server playing both the model and the judge."""

from __future__ import annotations

import pytest

from evaluation.judge import decide, read_vote
from evaluation.contract import configured
from evaluation.sources import Source, from_folder
from evaluation.stage import evaluate
from evaluation.templates import load_templates
from tests.evaluation.conftest import with_evaluate
from tests.support.openai_server import ScriptedOpenAI, chat_completion


@pytest.mark.parametrize("judgement, vote", [
    ("Analysis: round and circle mean the same.\nScore: 1", 1),
    ("Assessment: it names both options.\nSCORE: 0", 0),
    ("The reply says score: 1 at first... on reflection\nScore: 0", 0),   # the last score counts
    ("Most likely score = 1", 1),
    ("**Score:** 1", 1),                                                # markdown bold around the label
    ("I think it is right.", None),
])
def test_votes_are_read_from_the_last_score_line(judgement, vote):
    assert read_vote(judgement) == vote


def test_the_majority_of_counted_votes_decides_and_a_tie_is_wrong():
    assert decide([1, 1, 1, 0, 0]) and not decide([1, 1, 0, 0, 0])
    assert decide([1, 1, None, None, 0])            # 2 of 3 counted
    assert not decide([1, 0, None, None, None])     # a tie
    assert not decide([None] * 5)


def test_five_prompts_under_two_rules():
    prompts = load_templates().judge
    assert [p.rule for p in prompts] == [1, 1, 1, 2, 2]
    assert all("{reply}" in p.text and "{reference}" in p.text for p in prompts)


def test_free_text_replies_are_graded_by_the_ensemble(published, tmp_path):
    questions = from_folder(published.folder)[:4]
    judged: list[str] = []

    def responder(request):
        content = request["messages"][0]["content"]
        if request["model"] == "judge":
            judged.append(content)
            # the third prompt cannot make up its mind; the others follow the reference's letter
            if "Assessment:" in content:
                return chat_completion("It is hard to say.")
            right = "(A)" in content.split("answer:", 1)[1].split("\n", 1)[0] if "answer:" in content else False
            return chat_completion(f"Analysis: compared.\nScore: {int(right)}")
        return chat_completion("I would say the first one, though the picture is small.")

    with ScriptedOpenAI(responder) as server:
        settings = with_evaluate(published.settings, tmp_path, {"models": {"vlm": {
            "kind": "openai", "model": "talker", "judge_model": "judge"}}}, openai_base_url=server.base_url)
        stage = configured(settings).stage(published.store, settings, Source("release:v1", questions), "vlm")
        evaluate(published.store, stage)
    rows = {r["question_id"]: r for r in published.store.predictions([stage.run.id])}
    assert len(judged) == 5 * len(questions)
    assert "<<<ANSWER\nI would say the first one, though the picture is small.\nANSWER>>>" in judged[0]
    for q in questions:
        row = rows[q.question_id]
        assert row["status"] == "unmatched" and row["votes"][2] is None
        assert row["correct"] == (q.answer == 0) and row["votes"] == [int(q.answer == 0)] * 2 + [None] + [
            int(q.answer == 0)] * 2
