"""The review push as a Prefect stage (flows/review.py), on a real Prefect server and Label Studio."""

from __future__ import annotations

import uuid

from annotation.client import connect
from annotation.settings import ReviewSettings
from benchsmith.store import Store
from tests.annotation.conftest import seed_questions, seed_set_question
from tests.annotation.test_conversations import seed_conversations


def test_the_review_flow_pushes_new_questions_and_a_rerun_with_nothing_new_is_cached(prefect_api, label_studio):
    from flows.review import review_flow

    settings = label_studio.settings()
    with Store(settings.db_url) as store:
        questions = seed_questions(store, settings, [3, 4, 5])
    first = review_flow(settings)["review questions"]
    assert (first["sent"], first["project_created"]) == (3, True)
    with Store(settings.db_url) as store:
        assert {q.status for q in store.get_questions(ids=[q.id for q in questions])} == {"in_review"}
        runs = len(store.get_stage_runs())
    assert review_flow(settings)["review questions"] == {"cached": True}  # nothing to send: no task
    with Store(settings.db_url) as store:
        assert len(store.get_stage_runs()) == runs


def test_without_a_token_the_stage_says_it_skipped_and_touches_nothing(label_studio):
    from flows.review import review_stage

    settings = label_studio.settings()
    unset = settings.model_copy(update={"secrets": settings.secrets.model_copy(update={"label_studio_api_key": None})})
    with Store(settings.db_url) as store:
        seed_questions(store, settings, [3])
    assert "LABEL_STUDIO_API_KEY is not set" in review_stage(unset, "run1")["skipped"]
    with Store(settings.db_url) as store:
        assert {q.status for q in store.get_questions()} == {"candidate"}


def test_the_review_flow_sends_each_kind_to_its_own_project_with_its_own_labeling(prefect_api, label_studio):
    from flows.review import review_flow

    settings = label_studio.settings(conversation_project=f"conversations {uuid.uuid4().hex[:6]}")
    with Store(settings.db_url) as store:
        seed_questions(store, settings, [3])
        seed_set_question(store, settings, [(8, 8), (9, 9)])
        seed_conversations(store, settings, 2)
    out = review_flow(settings)
    review = settings.section("review", ReviewSettings)
    client = connect(settings).client
    questions = client.projects.get(id=out["review questions"]["project_id"])
    sets = client.projects.get(id=out["review image-set questions"]["project_id"])
    conversations = client.projects.get(id=out["review conversations"]["project_id"])
    assert (questions.title, sets.title, conversations.title) == (
        review.project, review.project + " (image sets)", review.conversation_project)
    # the build's closing hint names each of them
    assert [out[k]["project"] for k in ("review questions", "review image-set questions", "review conversations")] == [
        questions.title, sets.title, conversations.title]
    assert 'name="instruction_1"' in conversations.label_config and 'name="instruction_1"' not in questions.label_config
    assert '"$gallery"' in sets.label_config and '"$gallery"' not in questions.label_config
    assert (questions.task_number, sets.task_number, conversations.task_number) == (1, 1, 2)
