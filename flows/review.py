"""The review flow: push the questions that survived the blind filter, and the candidate conversations, to
Label Studio.

Pulling stays a command (`benchsmith review pull`): its input is the annotators' work on the server,
which no token of the store's tables can stand for, so it cannot be cached like a stage.
"""

from __future__ import annotations

from prefect import flow

from benchsmith.settings import Settings
from flows.tasks import new_run_id, run_stage


def review_stage(settings: Settings, run_id: str) -> dict:
    """The push task; callable inside any flow. Without LABEL_STUDIO_API_KEY it says so and does nothing."""
    if settings.secrets.label_studio_api_key is None:
        return {"skipped": "LABEL_STUDIO_API_KEY is not set (see `benchsmith labelstudio up`)"}

    def push_new(store) -> dict:
        from annotation import conversations
        from annotation.client import connect
        from annotation.push import push, questions_to_push
        from annotation.settings import ReviewSettings
        from benchsmith.dimensions import registry

        questions = questions_to_push(store, settings.section("review", ReviewSettings))
        out = {"sent": 0, "recovered": 0}
        if questions:
            out = push(store, connect(settings), settings, registry(), questions).as_dict()
        if store.get_conversations(status="candidate"):
            talks = conversations.push(store, connect(settings), settings)
            out["conversations"] = {"sent": talks.sent, "recovered": talks.recovered}
        return out
    return run_stage(settings, run_id, "review:push", push_new, reads=("questions", "conversations", "verdicts"),
                     sections=("review",))


@flow(name="benchsmith-review")
def review_flow(settings: Settings) -> dict:
    return review_stage(settings, new_run_id())
