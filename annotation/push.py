"""Send questions that passed the blind filter to Label Studio, each exactly once.

A push is a runner stage (`PushStage`, ledger stage `review:push`), shared with conversations. Per
batch: record the intent in the store, import the batch in one call, record the task ids the server
returns, move the questions to `in_review`. A push that dies anywhere in between is finished by the
next one: questions with an intent but no task id are looked up on the server (each task carries its
question id) before anything is sent again.

The same push sends second looks at published questions (annotation/second_look.py): another round,
to its own project, with a note in each task saying why the question is back. Questions about image sets
go to projects of their own (the same titles, " (image sets)" added), whose config shows a set's images
side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from annotation.client import LabelStudioError, Server, calls
from annotation.labeling import label_config, side_by_side, to_task
from annotation.settings import ReviewSettings
from benchsmith import runner
from benchsmith.dimensions import Registry
from benchsmith.records import Item, Question
from benchsmith.settings import Settings
from benchsmith.store import Store

STAGE = "review"


@dataclass(frozen=True)
class Round:
    """What one push sends: the first review of candidates (key ""), or a second look at published
    questions (key: the release version in doubt), each with a note the annotator reads in its task."""

    key: str = ""
    notes: Mapping[str, str] = field(default_factory=dict)


FIRST = Round()


@dataclass
class PushReport:
    project_id: int
    project_created: bool = False
    sent: int = 0
    recovered: int = 0  # sent by an interrupted push, confirmed now
    kind: str = ""      # "conversation", "image-set question": names the project

    def summary(self) -> str:
        made = "created" if self.project_created else "reused"
        return (f"{self.kind + ' ' if self.kind else ''}project {self.project_id} ({made}): {self.sent} tasks sent, "
                f"{self.recovered} recovered from an interrupted push")


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


def project_title(review: ReviewSettings, first: bool = True, sets: bool = False) -> str:
    return (review.project if first else review.second_look_project) + (" (image sets)" if sets else "")


def ensure_project(server: Server, settings: Settings, review: ReviewSettings,
                   first: bool = True, sets: bool = False) -> tuple[int, bool]:
    """The project named in settings (`review.project`, or `review.second_look_project` for second
    looks; " (image sets)" added for questions about image sets), created if missing and brought up to
    date if not; with the local storage that lets annotators see the media folder."""
    title = project_title(review, first, sets)
    fields = dict(label_config=label_config(review, second_look=not first, sets=sets),
                  maximum_annotations=review.overlap if first else review.second_look_overlap,
                  show_collab_predictions=review.show_predictions, expert_instruction=review.instructions,
                  show_instruction=bool(review.instructions))
    project_id, created = open_project(server, settings, review, title, fields)
    if created:
        hide_markup_column(server, project_id, GALLERY_COLUMN if sets else CROP_COLUMN)
    return project_id, created


GALLERY_COLUMN, CROP_COLUMN = "tasks:data.gallery", "tasks:data.crop"


def hide_markup_column(server: Server, project_id: int, column: str) -> None:
    """The task list of a new project, without the HTML of an image set's gallery or of a text question's
    crop: Label Studio's data manager shows every data field as a column, and these are markup only the
    labeling view should render (the `images` column lists the pictures)."""
    hidden = {"explore": [column], "labeling": [column]}
    with calls(server):
        server.client.views.create(project=project_id, data={"title": "Tasks", "hiddenColumns": hidden})


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


class Tasks(Protocol):
    """What the push stage needs to know about one kind of thing it sends (questions in a round, or
    conversations; each has an `id` and an `item_id`): its ledger name, its kind, the task field naming a
    subject, its round, and the task it becomes. Only a first review (round "") moves what it sends to
    `in_review`: a second look leaves a published question published."""

    name: str            # the push's ledger stage, e.g. `review:push`
    kind: str            # the lifecycle's kind of item: where its review tasks are recorded
    key: str             # the task data field holding the subject id
    round: str           # "" for a first review; else the round every task carries

    def task(self, subject: Any, item: Item) -> dict: ...


@dataclass(frozen=True)
class _Unit:
    subject: Any
    task_id: int | None  # known already: sent by an earlier push, possibly one that died before finishing


class PushStage(runner.Stage):
    """Sending subjects to one Label Studio project as a runner stage: a subject is done once the
    server holds its task and the store knows the task's id.

    Before a batch is imported its intent is recorded, so a push that died between the import and the
    store write is finished by the next one: the subjects with an intent but no task id are looked up
    on the server (each task carries its subject's id) and recorded, not sent again. The config key
    names the kind of push and its round, not the project's settings: editing the instructions or the
    labeling config updates the project, it never sends a task twice."""

    def __init__(self, server: Server, tasks: Tasks, project_id: int, subjects: Sequence[Any], batch_size: int) -> None:
        self.server = server
        self.tasks = tasks
        self.name = tasks.name
        self.project_id = project_id
        self.subjects = list(subjects)
        self.batch_size = batch_size
        self._items: dict[str, Item] = {}

    def config_key(self) -> str:
        return runner.config_key(self.tasks.name, self.tasks.round)

    def units(self, context: runner.StageContext) -> list[_Unit]:
        store = context.store
        ids = [s.id for s in self.subjects]
        recorded = store.get_review_tasks(self.tasks.kind, ids, self.tasks.round)
        known = {sid: task for sid, (_project, task) in recorded.items() if task is not None}
        unconfirmed: dict[int, set[str]] = {}
        for sid, (project, task) in recorded.items():
            if task is None:
                unconfirmed.setdefault(project, set()).add(sid)
        for project, sids in unconfirmed.items():
            known |= server_task_ids(self.server, project, sids, self.tasks.round, key=self.tasks.key)
        return [_Unit(s, known.get(sid)) for s, sid in zip(self.subjects, ids)]

    def subject(self, unit: _Unit) -> str:
        return unit.subject.id

    def windows(self) -> tuple[int, int | None]:
        return self.batch_size, None

    def process(self, units: Sequence[_Unit], context: runner.StageContext) -> Iterator[tuple[_Unit, int]]:
        yield from ((u, u.task_id) for u in units if u.task_id is not None)
        fresh = [u.subject for u in units if u.task_id is None]
        if not fresh:
            return
        wanted = sorted({s.item_id for s in fresh} - set(self._items))
        self._items |= {item.id: item for item in context.store.get_items(wanted, status=None)}
        missing = sorted({s.item_id for s in fresh} - set(self._items))
        if missing:
            raise LabelStudioError(f"{self.tasks.key.removesuffix('_id')}s refer to items missing from the "
                                   f"store: {missing[:3]}")
        ids = [s.id for s in fresh]
        context.store.record_review_intents(self.tasks.kind, ids, self.project_id, self.tasks.round)
        with calls(self.server):
            task_ids = self.server.import_tasks(
                self.project_id, [self.tasks.task(s, self._items[s.item_id]) for s in fresh])
        if len(task_ids) != len(ids):  # the server did not say which task is which; ask it
            found = server_task_ids(self.server, self.project_id, set(ids), self.tasks.round, key=self.tasks.key)
            task_ids = [found.get(sid) for sid in ids]
        for subject, task_id in zip(fresh, task_ids):
            yield _Unit(subject, None), task_id

    def commit(self, context: runner.StageContext, pairs: list[tuple[_Unit, int | None]],
               report: runner.StageReport) -> list[runner.Outcome]:
        found = {self.subject(u): task_id for u, task_id in pairs if task_id is not None}
        context.store.set_review_task_ids(found, self.tasks.round)
        if not self.tasks.round:
            context.store.move(self.tasks.kind, sorted(found), "in_review", stage=STAGE,
                               reason=f"sent to Label Studio project {self.project_id}")
        report.counters["recovered"] += sum(u.task_id is not None for u, _t in pairs)
        report.counters["sent"] += sum(u.task_id is None and t is not None for u, t in pairs)
        return [runner.Outcome(self.subject(u), "done", details={"task": task_id}) if task_id is not None
                else runner.Outcome(self.subject(u), "retry", "the server did not confirm the task")
                for u, task_id in pairs]


@dataclass(frozen=True)
class QuestionTasks:
    """Questions as review tasks, in a round of review: those about image sets (`sets`), or the others."""

    registry: Registry
    review: ReviewSettings
    base: str
    round: str = ""
    notes: Mapping[str, str] = field(default_factory=dict)  # question id -> why it is back (a second look)
    sets: bool = False
    kind: str = "question"
    key: str = "question_id"

    @property
    def name(self) -> str:
        return "review:push:sets" if self.sets else "review:push"

    def task(self, question: Question, item: Item) -> dict:
        return to_task(question, item, self.registry, self.review, self.base, round=self.round,
                       note=self.notes.get(question.id, ""))

    @property
    def title(self) -> str:
        return project_title(self.review, first=not self.round, sets=self.sets)

    def project(self, server: Server, settings: Settings) -> tuple[int, bool]:
        """The project this round's tasks go to: (id, created)."""
        return ensure_project(server, settings, self.review, first=not self.round, sets=self.sets)


def question_pushes(registry: Registry, review: ReviewSettings, base: str, questions: Sequence[Question],
                    round: Round = FIRST) -> list[tuple[QuestionTasks, list[Question]]]:
    """`questions` by the project they go to: those about single images and videos (even none), and
    those about image sets, if any."""
    on_sets = [side_by_side(q, registry) for q in questions]
    return [(QuestionTasks(registry, review, base, round.key, round.notes, sets=sets),
             [q for q, on_set in zip(questions, on_sets) if on_set == sets])
            for sets in (False, True) if not sets or any(on_sets)]


def push(store: Store, server: Server, settings: Settings, registry: Registry, questions: Sequence[Question],
         progress: Callable[[int], None] = lambda n: None, round: Round = FIRST) -> list[PushReport]:
    """Push `questions` (from `questions_to_push`, or a second look's plan) in batches; `progress(n)`
    after each. Only a first review moves questions to `in_review`; a published question stays published.
    One report a project: the one for single images and videos first, then the image sets' if any."""
    review = settings.section("review", ReviewSettings)
    reports = []
    for tasks, subjects in question_pushes(registry, review, image_base(settings, review), questions, round):
        project_id, created = tasks.project(server, settings)
        done = runner.run(PushStage(server, tasks, project_id, subjects, review.batch_size), store, progress=progress)
        reports.append(PushReport(project_id, created, sent=done.counters["sent"], recovered=done.counters["recovered"],
                                  kind="image-set question" if tasks.sets else ""))
    return reports
