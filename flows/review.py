"""The review flow: push the questions that survived the blind filter, and the candidate conversations, to
Label Studio, each kind as its own push stage (`annotation.push.PushStage`); and the pull that brings the
reviews back, as its runner stages (`annotation.pull.PullStage`)."""

from __future__ import annotations

from prefect import flow

from benchsmith.settings import Settings
from benchsmith.store import Store
from flows.tasks import new_run_id, run_stage


def review_stage(settings: Settings, run_id: str) -> dict:
    """The push stages; callable inside any flow. Without LABEL_STUDIO_API_KEY it says so and does nothing;
    with nothing to send it does not reach the server."""
    if settings.secrets.label_studio_api_key is None:
        return {"skipped": "LABEL_STUDIO_API_KEY is not set (see `benchsmith labelstudio up`)"}
    from annotation.client import connect
    from annotation.conversations import ConversationTasks
    from annotation.push import PushStage, image_base, question_pushes, questions_to_push
    from annotation.settings import ReviewSettings
    from benchsmith.dimensions import registry

    review = settings.section("review", ReviewSettings)
    base = image_base(settings, review)
    with Store(settings.db_url) as store:
        waiting = {"review image-set questions" if tasks.sets else "review questions": (tasks, questions)
                   for tasks, questions in question_pushes(registry(), review, base, questions_to_push(store, review))}
        waiting["review conversations"] = (ConversationTasks(base, review), store.get_conversations(status="candidate"))
    out = {}
    for kind, (tasks, subjects) in waiting.items():
        out[kind] = {"cached": True}
        if subjects:
            server = connect(settings)
            project_id, created = tasks.project(server, settings)  # each kind to its own project
            stage = PushStage(server, tasks, project_id, subjects, review.batch_size)
            out[kind] = run_stage(settings, run_id, tasks.name, stage) | {
                "project": tasks.title, "project_id": project_id, "project_created": created}
    return out


def pull_stage(settings: Settings, run_id: str) -> dict:
    """The pull stages, each a Prefect task only when the server holds a review version not pulled yet;
    callable inside any flow. Returns what `annotation.pull.pull_line` prints."""
    from annotation.client import connect
    from annotation.pull import pull
    from benchsmith.dimensions import registry

    server = connect(settings)
    with Store(settings.db_url) as store:
        return pull(store, server, settings, registry(),
                    run=lambda stage: run_stage(settings, run_id, stage.name, stage)).as_dict()


@flow(name="benchsmith-review")
def review_flow(settings: Settings) -> dict:
    return review_stage(settings, new_run_id())
