"""Pushing questions to a real Label Studio server: once each, whatever happens half-way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import httpx
import pytest
import sqlalchemy as sa

from annotation.client import LabelStudioError, connect
from annotation.labeling import CROP_VIEW, label_config, to_task
from annotation.push import Round, image_base, push, questions_to_push
from annotation.settings import ReviewSettings
from benchsmith.dimensions import registry
from benchsmith.paths import REPO_ROOT
from benchsmith.records import Verdict
from benchsmith.settings import load_settings
from benchsmith.store import Store
from benchsmith.store.schema import review_tasks
from tests.annotation.conftest import seed_questions, seed_set_question


def server_tasks(server, project_id: int) -> list:
    return list(server.client.tasks.list(project=project_id, page_size=1000, fields="task_only"))


def run_push(settings, store):
    server = connect(settings)
    (report,) = push(store, server, settings, registry(), questions_to_push(store, settings.section("review", ReviewSettings)))
    return report


def test_push_sends_each_passed_candidate_once_and_a_repush_adds_nothing(label_studio):
    settings = label_studio.settings(overlap=3, batch_size=4)
    with Store(settings.db_url) as store:
        questions = seed_questions(store, settings, [3, 3, 5, 5, 2, 9, 1, 4, 6, 7])
        dropped = seed_questions(store, settings, [3], blind_passed=False)
        report = run_push(settings, store)
        assert (report.project_created, report.sent, report.recovered) == (True, 10, 0)

        server = connect(settings)
        tasks = server_tasks(server, report.project_id)
        recorded = store.get_review_tasks("question")
        assert sorted(t.data["question_id"] for t in tasks) == sorted(q.id for q in questions)
        assert {t.data["question_id"]: t.id for t in tasks} == {qid: task for qid, (_, task) in recorded.items()}
        assert {q.status for q in store.get_questions(ids=[q.id for q in questions])} == {"in_review"}
        assert store.get_questions(ids=[dropped[0].id])[0].status == "candidate"
        project = server.client.projects.get(id=report.project_id)
        assert project.maximum_annotations == 3
        done = store.ledger_rows("review:push")  # the push is a runner stage: done-ness is in the ledger
        assert sorted(r["subject"] for r in done) == sorted(q.id for q in questions)
        assert {r["details"]["task"] for r in done} == {t.id for t in tasks}

        again = run_push(settings, store)
        assert (again.project_id, again.project_created, again.sent) == (report.project_id, False, 0)
        assert len(server_tasks(server, report.project_id)) == 10


def test_questions_about_image_sets_go_to_projects_of_their_own_in_each_round(label_studio):
    settings = label_studio.settings(second_look_project=f"second {uuid.uuid4().hex[:8]}")
    review = settings.section("review", ReviewSettings)
    with Store(settings.db_url) as store:
        question = seed_set_question(store, settings, [(8, 8), (9, 9)])
        server = connect(settings)
        single, sets = push(store, server, settings, registry(), questions_to_push(store, review))
        assert (single.sent, sets.sent, sets.summary()) == (0, 1, f"image-set question project {sets.project_id} "
                                                            "(created): 1 tasks sent, 0 recovered from an interrupted push")
        (task,) = server_tasks(server, sets.project_id)
        assert task.data["question_id"] == question.id and task.data["gallery"].count("<figure") == 2
        # the task lists do not show the markup of a gallery or of a text question's crop as text
        (view,) = server.client.views.list(project=sets.project_id)
        assert "tasks:data.gallery" in view.data["hiddenColumns"]["explore"]
        (view,) = server.client.views.list(project=single.project_id)
        assert "tasks:data.crop" in view.data["hiddenColumns"]["explore"]

        _single, looked = push(store, server, settings, registry(), [question], round=Round("v1", {question.id: "why"}))
        project = server.client.projects.get(id=looked.project_id)
        assert (project.title, looked.sent) == (review.second_look_project + " (image sets)", 1)
        assert '"$gallery"' in project.label_config and '"$note"' in project.label_config


def test_new_instructions_update_the_project_and_send_nothing_again(label_studio):
    settings = label_studio.settings()
    with Store(settings.db_url) as store:
        seed_questions(store, settings, [3, 4])
        first = run_push(settings, store)
        shown = connect(settings).client.projects.get(id=first.project_id)
        assert shown.show_instruction and "pick the one right option" in shown.expert_instruction  # the default
        edited = load_settings(env=dict(label_studio.env, BENCHSMITH_WORKSPACE=str(settings.workspace),
                                        BENCHSMITH__REVIEW__PROJECT=settings.raw["review"]["project"],
                                        BENCHSMITH__REVIEW__INSTRUCTIONS="Look at the picture twice."))
        again = run_push(edited, store)
        assert (first.sent, again.project_id, again.sent, again.recovered) == (2, first.project_id, 0, 0)
    project = connect(edited).client.projects.get(id=first.project_id)
    assert project.expert_instruction == "Look at the picture twice."
    assert len(server_tasks(connect(edited), first.project_id)) == 2


def test_a_project_from_before_text_crops_takes_the_new_config_with_its_old_tasks(label_studio):
    settings = label_studio.settings()
    review = settings.section("review", ReviewSettings)
    server = connect(settings)
    old = server.client.projects.create(title=review.project, label_config=label_config(review).replace(CROP_VIEW, ""))
    with Store(settings.db_url) as store:
        seed_questions(store, settings, [3])
        (question,) = seed_questions(store, settings, [9])
        task = to_task(question, store.get_items([question.item_id])[0], registry(), review, image_base(settings, review))
        del task["data"]["crop"]  # as pushed before crops were shown, by a store this test does not hold
        task["data"]["question_id"] = "pushed-before"
        server.client.projects.import_tasks(id=old.id, request=[task])
        read = question.model_copy(update={"text": "What does the text in the image say?",
                                           "meta": {"template": "text", "crop": [0.1, 0.2, 0.6, 0.5]}})
        store.add_questions([read], stage="generate", verdicts_for_new=[Verdict(
            subject_id=read.id, subject_kind="question", stage="blind", rule="text_only_solvers", passed=True)])
        report = run_push(settings, store)
    assert report.project_id == old.id and "$crop" in connect(settings).client.projects.get(id=old.id).label_config
    crops = {t.data["question_id"]: t.data.get("crop") for t in server_tasks(server, old.id)}
    assert crops.pop("pushed-before") is None and 'data-crop="' in crops.pop(read.id)
    assert list(crops.values()) == ["", ""]


def test_images_are_served_to_annotators_through_the_local_storage(label_studio):
    settings = label_studio.settings()
    with Store(settings.db_url) as store:
        seed_questions(store, settings, [3])
        report = run_push(settings, store)
    task = server_tasks(connect(settings), report.project_id)[0]
    url = task.data["images"][0]
    assert url.startswith("/data/local-files/?d=")
    served = httpx.get(label_studio.url + url, headers={"Authorization": f"Token {label_studio.env['LABEL_STUDIO_API_KEY']}"})
    assert served.status_code == 200
    assert served.content == (settings.media_dir / "img00000.png").read_bytes()


def test_bucket_urls_point_at_the_media_path(label_studio):
    settings = label_studio.settings(images="url", image_base_url="https://bucket.example/bench/media/")
    with Store(settings.db_url) as store:
        seed_questions(store, settings, [3])
        report = run_push(settings, store)
    task = server_tasks(connect(settings), report.project_id)[0]
    assert task.data["images"] == ["https://bucket.example/bench/media/img00000.png"]


def test_the_dimension_is_preselected_and_the_answer_only_when_predictions_are_shown(label_studio):
    for shown in (False, True):
        settings = label_studio.settings(show_predictions=shown)
        with Store(settings.db_url) as store:
            question = seed_questions(store, settings, [5])[0]
            report = run_push(settings, store)
        client = connect(settings).client
        task = server_tasks(connect(settings), report.project_id)[0]
        dimensions = task.data["dimensions"]
        assert [d["value"] for d in dimensions if d["selected"]] == ["instances_counting"]
        assert [d["value"] for d in dimensions] == [d.key for d in registry().for_modality("image")]
        predicted = [r["value"]["choices"] for p in client.predictions.list(task=task.id) for r in p.result]
        assert predicted == ([["ABCD"[question.answer]]] if shown else [])
        assert client.projects.get(id=report.project_id).show_collab_predictions is shown


def test_a_push_killed_halfway_and_rerun_leaves_exactly_one_task_per_question(label_studio):
    settings = label_studio.settings(batch_size=50)
    with Store(settings.db_url) as store:
        questions = seed_questions(store, settings, [1 + i % 9 for i in range(1500)])
    env = dict(label_studio.env, BENCHSMITH_WORKSPACE=str(settings.workspace),
               BENCHSMITH__REVIEW__PROJECT=settings.raw["review"]["project"], BENCHSMITH__REVIEW__BATCH_SIZE="50")
    child = subprocess.Popen([sys.executable, "-c", "from flows.app import main; main()", "review", "push"],
                             env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    engine = sa.create_engine(settings.db_url)
    deadline = time.time() + 120
    pushed = 0
    while pushed < 300:
        assert child.poll() is None, child.stdout.read().decode()
        assert time.time() < deadline, "the push did not get going"
        with engine.connect() as conn:
            pushed = conn.scalar(sa.select(sa.func.count()).select_from(review_tasks)) or 0
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    engine.dispose()

    with Store(settings.db_url) as store:
        assert len(store.get_review_tasks("question")) < len(questions), "killed too late to prove anything"
        report = run_push(settings, store)
        assert report.sent < len(questions)
        tasks = server_tasks(connect(settings), report.project_id)
        per_question = Counter(t.data["question_id"] for t in tasks)
        assert len(tasks) == len(questions)
        assert set(per_question) == {q.id for q in questions} and set(per_question.values()) == {1}
        assert {qid: task for qid, (_, task) in store.get_review_tasks("question").items()} == {t.data["question_id"]: t.id
                                                                                     for t in tasks}
        assert run_push(settings, store).sent == 0


def test_tasks_imported_before_a_crash_are_found_on_the_server_not_sent_again(label_studio):
    settings = label_studio.settings()
    review = settings.section("review", ReviewSettings)
    with Store(settings.db_url) as store:
        questions = seed_questions(store, settings, [3, 4, 5, 6])
        first = run_push(settings, store)  # creates the project
        assert first.sent == 4
        late = seed_questions(store, settings, [7, 8])
        # what a push does before it dies: intent recorded, tasks imported, ids never written back
        items = {i.id: i for i in store.get_items()}
        store.record_review_intents("question", [q.id for q in late], first.project_id)
        connect(settings).client.projects.import_tasks(id=first.project_id, request=[
            to_task(q, items[q.item_id], registry(), review, image_base(settings, review)) for q in late])
        report = run_push(settings, store)
        assert (report.sent, report.recovered) == (0, 2)
        assert len(server_tasks(connect(settings), first.project_id)) == 6
        assert {q.status for q in store.get_questions(ids=[q.id for q in questions + late])} == {"in_review"}


def test_a_stopped_server_gives_a_clear_error_loses_nothing_and_a_rerun_completes(label_studio):
    settings = label_studio.settings()
    with Store(settings.db_url) as store:
        seed_questions(store, settings, [3, 5])
        run_push(settings, store)
        later = seed_questions(store, settings, [6, 7, 8])
        label_studio.stop()
        try:
            with pytest.raises(LabelStudioError, match="cannot reach Label Studio at .*benchsmith labelstudio up"):
                run_push(settings, store)
            assert {q.status for q in store.get_questions(ids=[q.id for q in later])} == {"candidate"}
        finally:
            label_studio.start()
        report = run_push(settings, store)
        assert (report.sent, report.project_created) == (3, False)
        assert len(server_tasks(connect(settings), report.project_id)) == 5


def test_a_wrong_token_or_no_token_is_refused_clearly(label_studio):
    settings = label_studio.settings()
    bad = settings.model_copy(update={"secrets": settings.secrets.model_copy(update={"label_studio_api_key": None})})
    with pytest.raises(LabelStudioError, match="LABEL_STUDIO_API_KEY is not set"):
        connect(bad)
    from pydantic import SecretStr
    wrong = settings.model_copy(update={"secrets": settings.secrets.model_copy(
        update={"label_studio_api_key": SecretStr("not-a-token")})})
    with pytest.raises(LabelStudioError, match="refused the token") as error:
        connect(wrong)
    assert "not-a-token" not in str(error.value)


def test_only_questions_that_passed_the_blind_filter_and_failed_none_of_its_checks_are_pushed(label_studio):
    settings = label_studio.settings()
    with Store(settings.db_url) as store:
        passed, mixed = seed_questions(store, settings, [3, 4])
        store.add_verdicts([Verdict(subject_id=mixed.id, subject_kind="question", stage="blind", rule="other_solver",
                                    passed=False)])
        assert [q.id for q in questions_to_push(store, settings.section("review", ReviewSettings))] == [passed.id]
