"""Second looks end to end: a real small release, two chat models scored on it through the scripted
OpenAI-compatible server, `eval items` flags three questions, `review push --flagged` sends them to
the real Label Studio, an annotator changes one answer, withdraws one question and confirms one, and
`publish` v2 carries the change and the withdrawal with their reasons."""

from __future__ import annotations

import json
import re
import uuid

import yaml

from annotation.client import connect
from annotation.pull import pull
from annotation.push import push, questions_to_push
from annotation.second_look import DOUBT, RULE, STAGE
from annotation.settings import ReviewSettings
from benchsmith.dimensions import registry
from publish.release import publish
from benchsmith.settings import load_settings
from benchsmith.store import Store
from evaluation.sources import from_folder
from tests.annotation.conftest import seed_questions
from tests.annotation.test_cli import benchsmith
from tests.annotation.test_pull import result
from tests.support.openai_server import ScriptedOpenAI, chat_completion

# question index -> the letter both models reply; the keys are A, B, C, D, A (index % 4)
REPLIES = {0: "B", 1: "A", 2: "D", 3: "D", 4: "A"}
DIMENSION = 3


def reply(body: dict) -> object:
    text = next(part["text"] for part in body["messages"][0]["content"] if part["type"] == "text")
    index = int(re.search(r"Question (\d+):", text).group(1))
    return chat_completion(f"The answer is ({REPLIES[index]}).")


def test_flagged_questions_come_back_and_the_next_version_changes_withdraws_or_keeps_them(label_studio, tmp_path):
    name = uuid.uuid4().hex[:8]
    (tmp_path / "benchsmith.yaml").write_text(yaml.safe_dump({"evaluate": {"models": {
        "m1": {"kind": "openai", "model": "scripted-1"}, "m2": {"kind": "openai", "model": "scripted-2"}}}}))
    env = label_studio.env | {
        "BENCHSMITH_WORKSPACE": str(label_studio.root / f"ws-{name}"), "BENCHSMITH_SETTINGS": str(tmp_path / "benchsmith.yaml"),
        "BENCHSMITH__REVIEW__PROJECT": f"first {name}", "BENCHSMITH__REVIEW__SECOND_LOOK_PROJECT": f"second {name}",
        "BENCHSMITH__REVIEW__OVERLAP": "1", "COLUMNS": "200"}
    settings = load_settings(env=env)
    review = settings.section("review", ReviewSettings)
    server = connect(settings)

    # v1: five questions, each kept with the generator's answer by one annotator
    with Store(settings.db_url) as store:
        questions = seed_questions(store, settings, [DIMENSION] * 5)
        push(store, server, settings, registry(), questions_to_push(store, review))
        tasks = store.get_review_tasks("question")
        for q in questions:
            task_id = tasks[q.id][1]
            data = server.client.tasks.get(id=task_id).data
            server.client.annotations.create(id=task_id, result=result(data, True, q.answer, DIMENSION, (), review))
        assert pull(store, server, settings, registry()).outcomes["accepted"] == 5
        v1 = publish(store, settings, "v1")

    unflagged = benchsmith(env, "review", "push", "--flagged")
    assert unflagged.returncode == 2 and "no question is flagged: run `benchsmith eval items`" in unflagged.stderr

    # both models pick the same wrong option on questions 0, 1 and 2
    with ScriptedOpenAI(reply) as openai:
        scored = benchsmith(env | {"OPENAI_BASE_URL": openai.base_url}, "eval", "run", "-m", "m1", "-m", "m2")
    assert scored.returncode == 0, scored.stderr
    items = benchsmith(env, "eval", "items")
    assert items.returncode == 0, items.stderr
    ids = [q.id for q in questions]
    with Store(settings.db_url) as store:
        flags = store.get_verdicts(stage="item_analysis")
    assert {v.subject_id for v in flags} == set(ids[:3]) and not any(v.passed for v in flags)
    assert {v.rule for v in flags if v.subject_id == ids[0]} == {"same_wrong_option", "no_model_beats_chance"}
    assert next(v for v in flags if v.subject_id == ids[0]).details == {
        "source": "release:v1", "key": "A", "choices": {"m1": "B", "m2": "B"}, "blind_right": []}

    sent = benchsmith(env, "review", "push", "--flagged")
    assert sent.returncode == 0, sent.stderr
    assert "(created): 3 tasks sent" in sent.stdout
    again = benchsmith(env, "review", "push", "--flagged")
    # nothing was interrupted: the ledger already holds all three, so nothing is sent or looked up again
    assert again.returncode == 0 and "0 tasks sent, 0 recovered" in again.stdout, again.stdout + again.stderr

    with Store(settings.db_url) as store:
        second = store.get_second_look_tasks()
        assert set(second) == {(qid, "v1") for qid in ids[:3]}
        assert {q.status for q in store.get_questions()} == {"published"}   # a second look moves nothing
        doubts = {v.subject_id: v for v in store.get_verdicts(stage=STAGE) if v.rule == DOUBT}
        assert doubts[ids[1]].details["choices"] == {"m1": "A", "m2": "A"}
    first_project = {project for project, _ in tasks.values()}
    looks_project = {project for project, _ in second.values()}
    assert len(looks_project) == 1 and looks_project.isdisjoint(first_project)
    [project] = looks_project
    on_server = list(server.client.tasks.list(project=project, fields="all"))
    assert len(on_server) == 3                                           # pushing twice sent nothing twice
    data = {task.data["question_id"]: task.data for task in on_server}
    note = data[ids[0]]["note"]
    assert "Published answer: A." in note and "every model evaluated chose the same wrong option" in note
    assert "m1 chose B, m2 chose B" in note and data[ids[0]]["round"] == "v1"

    # the annotator: question 0's key is wrong (B), question 1 is ambiguous, question 2 is right as published
    task_of = {qid: task for (qid, _round), (_project, task) in second.items()}
    decisions = {ids[0]: (True, 1, DIMENSION, ()), ids[1]: (False, None, DIMENSION, ("ambiguous",)),
                 ids[2]: (True, 2, DIMENSION, ())}
    for qid, (keep, answer, dimension, reasons) in decisions.items():
        server.client.annotations.create(id=task_of[qid],
                                         result=result(data[qid], keep, answer, dimension, reasons, review))
    pulled = benchsmith(env, "review", "pull")
    assert pulled.returncode == 0, pulled.stderr
    assert "second looks: 1 changed, 1 confirmed, 1 withdrawn" in pulled.stdout, pulled.stdout

    with Store(settings.db_url) as store:
        by_id = {q.id: q for q in store.get_questions()}
        assert (by_id[ids[0]].answer, by_id[ids[0]].review_answer) == (0, 1)   # the generator's key stays on record
        verdicts = {v.subject_id: v for v in store.get_verdicts(stage=STAGE) if v.rule == RULE}
        assert {qid: v.details["outcome"] for qid, v in verdicts.items()} == {
            ids[0]: "changed", ids[1]: "withdrawn", ids[2]: "confirmed"}
        assert [e["reason"] for e in store.events(ids[0])][-1] == (
            "answer A -> B at a second look (flagged by the models: same_wrong_option, no_model_beats_chance)")
    items = benchsmith(env, "eval", "items")      # the flags stay, each with what the second look made of it
    assert items.returncode == 0 and "(confirmed at a second look)" in items.stdout, items.stdout + items.stderr
    for outcome in ("changed", "withdrawn"):
        assert f"({outcome} at a second look)" in items.stdout, items.stdout
    status = benchsmith(env, "review", "status")
    assert re.search(r"second looks changed\s*│\s*1", status.stdout), status.stdout

    # v2 without --allow-changes: the change and the withdrawal were decided, so neither is silent
    published = benchsmith(env, "publish", "--version", "v2")
    assert published.returncode == 0, published.stderr
    assert "since v1: 0 added, 1 removed, 1 changed" in published.stdout
    folder = v1.folder.parent / "v2"
    changelog = (folder / "CHANGELOG.md").read_text()
    assert (f"- `{ids[0]}`: answer A -> B at a second look (flagged by the models: same_wrong_option, "
            "no_model_beats_chance)") in changelog
    assert f"- `{ids[1]}`: withdrawn at a second look: ambiguous" in changelog
    manifest = json.loads((folder / "release.json").read_text())
    assert ids[1] not in manifest["questions"] and len(manifest["questions"]) == 4
    assert manifest["changes"] == {"added": 0, "removed": 1, "changed": 1}
    assert set(manifest["change_notes"]) == {ids[0], ids[1]}
    answers = {q.question_id: q.answer for q in from_folder(folder)}
    assert answers[ids[0]] == 1 and answers[ids[2]] == 2

    # the v1 flags again: the changed one is stale, the withdrawn one is gone, the confirmed one is cleared
    after = benchsmith(env, "review", "push", "--flagged")
    assert after.returncode == 0, after.stderr
    assert "0 tasks sent" in after.stdout
    for line in ("1 changed since v1 was evaluated", "1 not in the latest release v2",
                 "1 already decided at a second look (confirmed)"):
        assert line in after.stdout, after.stdout


def test_push_flagged_before_anything_is_published_says_what_to_do(label_studio):
    settings = label_studio.settings(overlap=1)
    env = label_studio.env | {"BENCHSMITH_WORKSPACE": str(settings.workspace), "COLUMNS": "200"}
    with Store(settings.db_url) as store:
        seed_questions(store, settings, [3])
    nothing = benchsmith(env, "review", "push", "--flagged")
    assert nothing.returncode == 2 and "nothing is published yet" in nothing.stderr, nothing.stderr
