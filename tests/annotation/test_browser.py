"""End to end in headless Chromium: an annotator labels a pushed question, and a pull brings the answer back.

Needs Debian's `chromium` and `npm install` in tests/browser (playwright-core drives the browser).
The labeling page is saved to tests/browser/artifacts/labeling-page.png.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from annotation.client import connect
from annotation.pull import pull
from annotation.push import push, questions_to_push
from annotation.settings import ReviewSettings
from benchsmith.dimensions import registry
from benchsmith.paths import REPO_ROOT
from benchsmith.store import Store
from tests.annotation.conftest import ADMIN, ADMIN_PASSWORD, seed_questions

BROWSER = REPO_ROOT / "tests" / "browser"


def test_an_annotator_sees_the_question_and_submits_an_answer_that_a_pull_brings_back(label_studio):
    node = shutil.which("node")
    if node is None or not (BROWSER / "node_modules" / "playwright-core").exists():
        pytest.fail("needs node and playwright-core: run `npm install` in tests/browser")
    if not shutil.which("chromium"):
        pytest.fail("needs Debian's chromium: apt-get install -y chromium")
    settings = label_studio.settings(overlap=1)
    with Store(settings.db_url) as store:
        question = seed_questions(store, settings, [3])[0]
        report = push(store, connect(settings), settings, registry(),
                      questions_to_push(store, settings.section("review", ReviewSettings)))
        task_id = store.get_review_tasks()[question.id][1]

        chosen = (question.answer + 2) % 4
        label = f"{'ABCD'[chosen]}. {question.options[chosen]}"
        artifacts = BROWSER / "artifacts"
        artifacts.mkdir(exist_ok=True)
        screenshot = artifacts / "labeling-page.png"
        done = subprocess.run([node, "label_task.mjs", label_studio.url, ADMIN, ADMIN_PASSWORD,
                               str(report.project_id), str(task_id), label, str(screenshot)],
                              cwd=BROWSER, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr + done.stdout
        seen = json.loads(done.stdout.strip().splitlines()[-1])

        assert question.text in seen["question"]
        options = [text for text in seen["labels"] if text[:3] in ("A. ", "B. ", "C. ", "D. ")]
        assert options == [f"{'ABCD'[i]}. {text}[{i + 1}]" for i, text in enumerate(question.options)]
        assert seen["imageSize"] == [48, 32]
        assert seen["reasonsShownOnDiscard"] and not seen["reasonsShownOnKeep"]
        assert screenshot.stat().st_size > 10_000

        pulled = pull(store, connect(settings), settings, registry())
        assert pulled.outcomes["accepted"] == 1
        accepted = store.get_questions(ids=[question.id])[0]
        assert (accepted.status, accepted.review_answer, accepted.review_dimension_id) == ("accepted", chosen, 3)
        assert [r.annotator for r in store.get_reviews()] == [ADMIN]


def test_an_annotator_sees_each_turn_and_edits_a_reference_that_a_pull_brings_back(label_studio):
    from annotation import conversations as review_conversations
    from tests.annotation.test_conversations import seed_conversations

    node = shutil.which("node")
    if node is None or not (BROWSER / "node_modules" / "playwright-core").exists():
        pytest.fail("needs node and playwright-core: run `npm install` in tests/browser")
    settings = label_studio.settings(overlap=1, conversation_project="conversations in the browser")
    with Store(settings.db_url) as store:
        (conversation,) = seed_conversations(store, settings, 1)
        report = review_conversations.push(store, connect(settings), settings)
        task_id = store.get_conversation_review_tasks()[conversation.id][1]
        artifacts = BROWSER / "artifacts"
        artifacts.mkdir(exist_ok=True)
        screenshot = artifacts / "conversation-page.png"
        edited = "The left square, since it touches the border."
        done = subprocess.run([node, "review_conversation.mjs", label_studio.url, ADMIN, ADMIN_PASSWORD,
                               str(report.project_id), str(task_id), edited, str(screenshot)],
                              cwd=BROWSER, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr + done.stdout
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        values = {area["name"]: area["value"] for area in seen["areas"]}
        for n, turn in enumerate(conversation.turns, 1):   # every field starts with the generated text
            assert values[f"instruction_{n}"] == turn.instruction
            assert values[f"reference_{n}"] == turn.reference
            assert values[f"focus_points_{n}"] == "\n".join(turn.focus_points)

        pulled = review_conversations.pull(store, connect(settings), settings)
        assert pulled.outcomes["accepted"] == 1
        (accepted,) = store.get_conversations(ids=[conversation.id])
        assert accepted.final_turns[1].reference == edited
        assert accepted.final_turns[0] == conversation.turns[0] and accepted.final_turns[2] == conversation.turns[2]
