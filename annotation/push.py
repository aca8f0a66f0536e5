"""Send questions that passed the blind filter to Label Studio, each exactly once.

Per batch: record the intent in the store, import the batch in one call, record the task ids the
server returns, move the questions to `in_review`. A push that dies anywhere in between is finished
by the next one: questions with an intent but no task id are looked up on the server (each task
carries its question id) before anything is sent again.

The same push sends second looks at published questions (annotation/second_look.py): another round,
to its own project, with a note in each task saying why the question is back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from annotation.client import LabelStudioError, Server, calls
from annotation.labeling import label_config, to_task
from annotation.settings import ReviewSettings
from benchsmith.dimensions import Registry
from benchsmith.records import Question
from benchsmith.settings import Settings
from benchsmith.store import Store

STAGE = "review"


@dataclass(frozen=True)
class Round:
    """What one push sends: the first review of candidates (key ""), or a second look at published
    questions (key: the release version in doubt), each with a note the annotator reads in its task."""

    key: str = ""
    notes: Mapping[str, str] = field(default_factory=dict)

    @property
    def first(self) -> bool:
        return not self.key


FIRST = Round()


@dataclass
class PushReport:
    project_id: int
    project_created: bool = False
    sent: int = 0
    recovered: int = 0  # sent by an interrupted push, confirmed now

    def summary(self) -> str:
        made = "created" if self.project_created else "reused"
        return (f"project {self.project_id} ({made}): {self.sent} tasks sent, {self.recovered} recovered from an "
                "interrupted push")

    def as_dict(self) -> dict:
        return dict(vars(self))


def image_base(settings: Settings, review: ReviewSettings) -> str:
    """The URL prefix the annotator's browser puts in front of an item's media path."""
    if review.images == "url":
        if not review.image_base_url:
            raise LabelStudioError("review.images is 'url' but review.image_base_url is empty; set it to the "
                                   "bucket URL that holds the media folder")
        return review.image_base_url.rstrip("/") + "/"
    media = settings.media_dir.resolve()
    root = local_files_root(settings, review)
    try:
        relative = media.relative_to(root)
    except ValueError:
        raise LabelStudioError(f"the media folder {media} is not inside review.local_files_root {root}") from None
    if relative == Path("."):
        raise LabelStudioError("review.local_files_root must be a parent of the media folder, not the folder "
                               "itself (Label Studio refuses a storage at its document root)")
    return f"/data/local-files/?d={relative.as_posix()}/"


def local_files_root(settings: Settings, review: ReviewSettings) -> Path:
    """The folder Label Studio serves local files from (its LOCAL_FILES_DOCUMENT_ROOT)."""
    return Path(review.local_files_root).expanduser().resolve() if review.local_files_root else settings.workspace


def ensure_project(server: Server, settings: Settings, review: ReviewSettings,
                   first: bool = True) -> tuple[int, bool]:
    """The project named in settings (`review.project`, or `review.second_look_project` for second
    looks), created if missing and brought up to date if not; with the local storage that lets
    annotators see the media folder."""
    title = review.project if first else review.second_look_project
    fields = dict(label_config=label_config(review, second_look=not first),
                  maximum_annotations=review.overlap if first else review.second_look_overlap,
                  show_collab_predictions=review.show_predictions, expert_instruction=review.instructions,
                  show_instruction=bool(review.instructions))
    return open_project(server, settings, review, title, fields)


def open_project(server: Server, settings: Settings, review: ReviewSettings, title: str,
                 fields: dict) -> tuple[int, bool]:
    """The project called `title` (the oldest, if several), created if missing and updated with `fields`
    if not; with the local storage that lets annotators see the media folder. Returns (id, created)."""
    client = server.client
    with calls(server):
        found = [p for p in client.projects.list() if p.title == title]
        if found:
            project_id, created = min(p.id for p in found), False
            client.projects.update(id=project_id, **fields)
        else:
            project_id, created = client.projects.create(title=title, **fields).id, True
        if review.images == "local":
            media = str(settings.media_dir.resolve())
            if not any(s.path == media for s in client.import_storage.local.list(project=project_id)):
                client.import_storage.local.create(project=project_id, path=media, title="benchsmith media",
                                                   use_blob_urls=True)
    return project_id, created


def server_task_ids(server: Server, project_id: int, question_ids: set[str], round: str = "",
                    key: str = "question_id") -> dict[str, int]:
    """Tasks already on the server for these subjects in `round`: subject id (the task data's `key`) ->
    task id (the lowest, if a subject somehow has several)."""
    found: dict[str, int] = {}
    with calls(server):
        for task in server.client.tasks.list(project=project_id, page_size=1000, fields="task_only"):
            data = task.data or {}
            qid = data.get(key)
            if qid in question_ids and data.get("round", "") == round:
                found[qid] = min(task.id, found.get(qid, task.id))
    return found


def questions_to_push(store: Store, review: ReviewSettings) -> list[Question]:
    """Candidates that passed the stage before review and failed none of its checks."""
    verdicts = store.get_verdicts(stage=review.after_stage, subject_kind="question")
    failed = {v.subject_id for v in verdicts if not v.passed}
    passed = {v.subject_id for v in verdicts if v.passed} - failed
    return [q for q in store.get_questions(status="candidate") if q.id in passed]


def push(store: Store, server: Server, settings: Settings, registry: Registry, questions: Sequence[Question],
         progress: Callable[[int], None] = lambda n: None, round: Round = FIRST) -> PushReport:
    """Push `questions` (from `questions_to_push`, or a second look's plan) in batches; `progress(n)`
    after each. Only a first review moves questions to `in_review`; a published question stays published."""
    review = settings.section("review", ReviewSettings)
    base = image_base(settings, review)
    project_id, created = ensure_project(server, settings, review, round.first)
    report = PushReport(project_id, created)
    by_id = {q.id: q for q in questions}
    recorded = store.get_review_tasks(list(by_id), round.key)

    done = {qid for qid, (_, task_id) in recorded.items() if task_id is not None}
    unconfirmed: dict[int, set[str]] = {}
    for qid, (project, task_id) in recorded.items():
        if task_id is None:
            unconfirmed.setdefault(project, set()).add(qid)
    for project, qids in unconfirmed.items():
        found = server_task_ids(server, project, qids, round.key)
        store.set_review_task_ids(found, round.key)
        done |= set(found)
    _move_to_review(store, sorted(done), project_id, round)
    report.recovered = len(done)
    progress(len(done))

    items = {item.id: item for item in store.get_items(sorted({q.item_id for q in questions}), status=None)}
    fresh = [q for qid, q in by_id.items() if qid not in done]
    for start in range(0, len(fresh), review.batch_size):
        batch = fresh[start:start + review.batch_size]
        report.sent += _push_batch(store, server, project_id, batch, items, registry, review, base, round)
        progress(len(batch))
    return report


def _push_batch(store: Store, server: Server, project_id: int, batch: Sequence[Question], items: dict,
                registry: Registry, review: ReviewSettings, base: str, round: Round) -> int:
    missing = sorted({q.item_id for q in batch} - set(items))
    if missing:
        raise LabelStudioError(f"questions refer to items missing from the store: {missing[:3]}")
    tasks = [to_task(q, items[q.item_id], registry, review, base, round=round.key, note=round.notes.get(q.id, ""))
             for q in batch]
    qids = [task["data"]["question_id"] for task in tasks]
    store.record_review_intents(qids, project_id, round.key)
    with calls(server):
        task_ids = server.import_tasks(project_id, tasks)
    if len(task_ids) == len(qids):
        store.set_review_task_ids(dict(zip(qids, task_ids)), round.key)
    else:  # the server did not say which task is which; ask it
        store.set_review_task_ids(server_task_ids(server, project_id, set(qids), round.key), round.key)
    _move_to_review(store, qids, project_id, round)
    return len(qids)


def _move_to_review(store: Store, qids: Sequence[str], project_id: int, round: Round) -> None:
    if round.first:
        store.move_questions(qids, "in_review", stage=STAGE, reason=f"sent to Label Studio project {project_id}")
