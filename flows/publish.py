"""The publish flow: the accepted questions and conversations into a versioned dataset folder (and the
Hub, if asked).

A release is a deliberate act, so the stage runs only when a version is given, either to the stage or
as `publish.version` in the settings; otherwise it reports that it skipped. Its one subject is the version
and its config key the content of the release it would build (every question's and conversation's entry
hash, the publish settings, the Hub repository), so a rerun with nothing new runs nothing, and a build
whose items changed under a fixed version stops with publish's own clear error.

On a dask or ray task runner the images are encoded first, sharded by item id over the workers into the
workspace's image cache (which the workers must share, as they share the media folder); the release
itself is then written as on the local runner, reading every image back from that cache.
"""

from __future__ import annotations

from functools import partial

from prefect import flow

from benchsmith import runner
from benchsmith.settings import Settings
from benchsmith.store import Store
from flows.tasks import Once, new_run_id, run_sharded, run_stage
from publish.settings import PublishSettings


def publish_stage(settings: Settings, run_id: str, version: str | None = None, push: str | None = None) -> dict:
    """The publish stage; callable inside any flow."""
    from publish import conversations as conversation_config
    from publish.push import push_release
    from publish.release import collect_entries, publish, published_items

    options = settings.section("publish", PublishSettings)
    version, push = version or options.version, push or options.push
    if not version:
        return {"publish": "skipped: no version given (set publish.version or pass one)"}

    def release(store: Store) -> dict:
        result = publish(store, settings, version, repo=push)
        stats = {"version": result.version, "questions": result.n_questions, "folder": str(result.folder),
                 "configs": result.per_config, "added": len(result.changes.added),
                 "removed": len(result.changes.removed), "changed": len(result.changes.changed)}
        if push:
            token = settings.secrets.hf_token.get_secret_value() if settings.secrets.hf_token else None
            stats["pushed"] = push_release(result.folder, push, token, private=options.private)
        return stats
    with Store(settings.db_url) as store:
        entries, _left_out = collect_entries(store)
        content = runner.config_key(push, options.model_dump(mode="json", exclude={"version", "push"}),
                                    sorted((e.question_id, e.content_hash) for e in entries),
                                    sorted((e.conversation_id, e.content_hash) for e in conversation_config.collect(store)))
        stage = Once("publish", version, content, release)
        items = published_items(store, entries) \
            if settings.prefect.task_runner != "local" and runner.pending(stage, store, retry_failed=True) else []
    out = {}
    if items:
        out["publish images"] = run_sharded(settings, run_id, "publish:images", partial(images_shard, settings=settings),
                                            items)
    out["publish"] = run_stage(settings, run_id, "publish", stage, recorded=True, retry_failed=True)
    return out


def images_shard(store: Store, subjects: list[str] | None, *, settings: Settings) -> dict:
    """The release's images of the items `subjects` (None: every item it shows) encoded into the image
    cache; module-level so workers can unpickle it."""
    from publish.release import encode_images, published_items
    return encode_images(store, settings, published_items(store) if subjects is None else subjects)


@flow(name="benchsmith-publish")
def publish_flow(settings: Settings, version: str | None = None, push: str | None = None) -> dict:
    return publish_stage(settings, new_run_id(), version, push)
