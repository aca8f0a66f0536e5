"""The publish flow: the accepted questions into a versioned dataset folder (and the Hub, if asked).

A release is a deliberate act, so the stage runs only when a version is given, either to the stage or
as `publish.version` in the settings; otherwise it reports that it skipped. Its cache key is the
content of the release it would build (its questions and its conversations), so a rerun with nothing new to publish is served from cache,
and a build whose questions changed under a fixed version stops with publish's own clear error.

On a dask or ray task runner the images are encoded first, sharded by item id over the workers into the
workspace's image cache (which the workers must share, as they share the media folder); the release
itself is then written as on the local runner, reading every image back from that cache.
"""

from __future__ import annotations

from functools import partial

from prefect import flow

from publish.settings import PublishSettings
from benchsmith.records import stable_hash
from benchsmith.settings import Settings
from benchsmith.store import Store
from flows.tasks import new_run_id, run_sharded, run_stage


def publish_stage(settings: Settings, run_id: str, version: str | None = None, push: str | None = None) -> dict:
    """The publish task; callable inside any flow."""
    from publish import conversations as conversation_config
    from publish.push import push_release
    from publish.release import collect_entries, publish, published_items

    options = settings.section("publish", PublishSettings)
    version, push = version or options.version, push or options.push
    if not version:
        return {"publish": "skipped: no version given (set publish.version or pass one)"}
    with Store(settings.db_url) as store:
        entries, _left_out = collect_entries(store)
        conversations = conversation_config.collect(store)
        items = published_items(store, entries) if settings.prefect.task_runner != "local" else []
    content = stable_hash(version, push, sorted((e.question_id, e.content_hash) for e in entries),
                          sorted((e.conversation_id, e.content_hash) for e in conversations))
    out = {}
    if items:
        out["publish images"] = run_sharded(settings, run_id, "publish:images",
                                            partial(images_shard, settings=settings), items, reads=("items",),
                                            sections=("publish",), input_token=content)

    def release(store: Store) -> dict:
        result = publish(store, settings, version, repo=push)
        stats = {"version": result.version, "questions": result.n_questions, "folder": str(result.folder),
                 "configs": result.per_config,
                 "added": len(result.changes.added), "removed": len(result.changes.removed),
                 "changed": len(result.changes.changed)}
        if push:
            token = settings.secrets.hf_token.get_secret_value() if settings.secrets.hf_token else None
            stats["pushed"] = push_release(result.folder, push, token, private=options.private)
        return stats
    out["publish"] = run_stage(settings, run_id, "publish", release, reads=("reviews",),
                               sections=("publish", "review"), input_token=content)
    return out


def images_shard(store: Store, subjects: list[str] | None, *, settings: Settings) -> dict:
    """The release's images of the items `subjects` (None: every item it shows) encoded into the image
    cache; module-level so workers can unpickle it."""
    from publish.release import encode_images, published_items
    return encode_images(store, settings, published_items(store) if subjects is None else subjects)


@flow(name="benchsmith-publish")
def publish_flow(settings: Settings, version: str | None = None, push: str | None = None) -> dict:
    return publish_stage(settings, new_run_id(), version, push)
