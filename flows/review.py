"""The review flow: push the questions that survived the blind filter to Label Studio.

Pulling stays a command (`benchsmith review pull`): its input is the annotators' work on the server,
which no store state or settings fingerprint can stand for, so it cannot be cached like a stage.
"""

from __future__ import annotations

from prefect import flow

from benchsmith.settings import Settings
from benchsmith.store import Store
from flows.tasks import new_run_id, stage_task, timed


def _push(settings: Settings, run_id: str, settings_fingerprint: str, store_state: str) -> dict:
    from annotation.client import connect
    from annotation.push import push, questions_to_push
    from annotation.settings import ReviewSettings
    from benchsmith.dimensions import registry

    with Store(settings.db_url) as store:
        def work() -> dict:
            questions = questions_to_push(store, settings.section("review", ReviewSettings))
            if not questions:
                return {"sent": 0, "recovered": 0}
            return push(store, connect(settings), settings, registry(), questions).as_dict()
        return timed(store, run_id, "review:push", work)


def review_stage(settings: Settings, run_id: str) -> dict:
    """The push task; callable inside any flow. Without LABEL_STUDIO_API_KEY it says so and does nothing."""
    if settings.secrets.label_studio_api_key is None:
        return {"review push": "skipped: LABEL_STUDIO_API_KEY is not set (see `benchsmith labelstudio up`)"}
    push_task = stage_task("review-push", settings, _push)
    with Store(settings.db_url) as store:
        state = store.state_token()
    return {"review push": push_task(settings, run_id, settings.fingerprint(), state)}


@flow(name="benchsmith-review")
def review_flow(settings: Settings) -> dict:
    return review_stage(settings, new_run_id())
