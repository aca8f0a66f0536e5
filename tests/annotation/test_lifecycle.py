"""One lifecycle for questions and conversations, as a maintainer meets it through the CLI and the real
Label Studio: an annotator changes kept annotations after v1 is published (a question's answer, a
conversation's turn) and discards another question; `review pull` revises and withdraws them, and
`publish` v2 carries every change, listed with its reason in the CHANGELOG."""

from __future__ import annotations

import json
import re
import time
import uuid

import pyarrow.parquet as pq

from annotation import conversations as review_conversations
from annotation.client import connect
from annotation.push import push, questions_to_push
from annotation.settings import ReviewSettings
from benchsmith.dimensions import registry
from benchsmith.settings import load_settings
from benchsmith.store import Store
from evaluation.sources import from_folder
from tests.annotation.conftest import seed_questions
from tests.annotation.test_cli import benchsmith
from tests.annotation.test_conversations import choice, seed_conversations, text
from tests.annotation.test_pull import result

DIMENSION = 3


def test_changes_made_in_review_after_a_release_reach_the_next_one_with_their_reasons(label_studio):
    name = uuid.uuid4().hex[:8]
    env = label_studio.env | {
        "BENCHSMITH_WORKSPACE": str(label_studio.root / f"ws-{name}"), "BENCHSMITH__REVIEW__OVERLAP": "1",
        "BENCHSMITH__REVIEW__PROJECT": f"questions {name}",
        "BENCHSMITH__REVIEW__CONVERSATION_PROJECT": f"conversations {name}", "COLUMNS": "200"}
    settings = load_settings(env=env)
    review = settings.section("review", ReviewSettings)
    server = connect(settings)
    with Store(settings.db_url) as store:
        revised, withdrawn, kept = seed_questions(store, settings, [DIMENSION] * 3)
        (conversation,) = seed_conversations(store, settings, 1)
        push(store, server, settings, registry(), questions_to_push(store, review))
        review_conversations.push(store, server, settings)
        tasks = store.get_review_tasks("question")
        conversation_task = store.get_review_tasks("conversation")[conversation.id][1]
    annotations = {}
    for q in (revised, withdrawn, kept):
        data = server.client.tasks.get(id=tasks[q.id][1]).data
        annotations[q.id] = (tasks[q.id][1], data, server.client.annotations.create(
            id=tasks[q.id][1], result=result(data, True, q.answer, DIMENSION, (), review)).id)
    talk = server.client.annotations.create(id=conversation_task, result=[choice("keep", ["Keep"])])

    pulled = benchsmith(env, "review", "pull")
    assert pulled.returncode == 0, pulled.stderr
    assert "3 accepted" in pulled.stdout and "conversations: 1 accepted" in pulled.stdout, pulled.stdout
    assert benchsmith(env, "publish", "--version", "v1").returncode == 0

    # after v1: the annotator changes the first question's answer, discards the second, edits a turn
    time.sleep(1.1)  # Label Studio stamps updates to the second
    task, data, annotation = annotations[revised.id]
    new_answer = (revised.answer + 1) % 4
    server.client.annotations.update(id=annotation, result=result(data, True, new_answer, DIMENSION, (), review))
    task, data, annotation = annotations[withdrawn.id]
    server.client.annotations.update(id=annotation, result=result(data, False, None, DIMENSION, ("ambiguous",),
                                                                  review))
    edited = "The left one, because it touches the border."
    server.client.annotations.update(id=talk.id, result=[text("reference_2", edited), choice("keep", ["Keep"])])

    pulled = benchsmith(env, "review", "pull")
    assert pulled.returncode == 0, pulled.stderr
    assert "changed since decided: 1 revised, 1 withdrawn" in pulled.stdout, pulled.stdout
    assert "conversations: 1 revised" in pulled.stdout, pulled.stdout
    assert benchsmith(env, "review", "pull").stdout.count("revised") == 0     # a second pull changes nothing

    status = benchsmith(env, "review", "status")
    assert re.search(r"withdrawn\s*│\s*1", status.stdout), status.stdout
    assert re.search(r"conversations published\s*│\s*1", status.stdout), status.stdout

    published = benchsmith(env, "publish", "--version", "v2")                 # no --allow-changes needed
    assert published.returncode == 0, published.stderr
    assert "since v1: 0 added, 1 removed, 2 changed" in published.stdout, published.stdout
    folder = settings.workspace / "releases" / "v2"
    changelog = (folder / "CHANGELOG.md").read_text()
    letters = "ABCD"
    assert (f"- `{revised.id}`: answer {letters[revised.answer]} -> {letters[new_answer]} in review"
            in changelog), changelog
    assert f"- `{withdrawn.id}`: withdrawn in review: discarded: ambiguous" in changelog
    assert f"- conversation `{conversation.id}`: edited in review: turn 2 reference" in changelog
    answers = {q.question_id: q.answer for q in from_folder(folder)}
    assert answers == {revised.id: new_answer, kept.id: kept.answer}
    manifest = json.loads((folder / "release.json").read_text())
    assert manifest["conversations"].keys() == {conversation.id}
    rows = [row for shard in sorted((folder / "conversations").glob("*.parquet"))
            for row in pq.read_table(shard, columns=["reference_2"]).to_pylist()]
    assert rows == [{"reference_2": edited}]
    with Store(settings.db_url) as store:
        assert {q.id: q.status for q in store.get_questions()} == {
            revised.id: "published", withdrawn.id: "withdrawn", kept.id: "published"}
        history = [(e["from_status"], e["to_status"], e["stage"]) for e in store.events(conversation.id)]
        assert history == [(None, "candidate", "generate"), ("candidate", "in_review", "review"),
                           ("in_review", "accepted", "review"), ("accepted", "published", "publish"),
                           ("published", "published", "review"), ("published", "published", "publish")]
