"""Human review of conversations in Label Studio: annotators read the picture and the three turns, edit
each turn's instruction, reference answer and focus points where needed, and keep or discard the
conversation with a reason.

Conversations go to a project of their own (`review.conversation_project`), pushed the way questions are:
an intent row before each batch, the server's task ids after, unconfirmed intents looked up on the server
before anything is sent again. Each text area starts with the generated text; a field an annotator leaves
alone comes back as it was.

A pull stores every version of every annotation (an annotation edited in Label Studio since the last pull
is a new version; none replaces another); the shared review lifecycle (annotation/lifecycle.py) then
decides each conversation from the latest submission: kept, it is accepted with that version's turns, and
a later edit revises it, published or not; discarded, it is rejected (or withdrawn, once decided). An
edit that breaks the structure (an emptied reference, an instruction that now gives an earlier answer
away) is not accepted: the conversation waits with a verdict saying why, until an annotator fixes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from annotation.client import Server, read_annotations
from annotation.lifecycle import Decision, Kind
from annotation.labeling import KEEP, annotator_of, image_urls, keep_or_discard, results, saved_at
from annotation.push import PushReport, PushStage, image_base, open_project
from annotation.settings import ReviewSettings
from benchsmith import runner
from benchsmith.records import LEVELS, Conversation, ConversationReview, Image, Turn
from benchsmith.settings import Settings
from benchsmith.store import Store
from generators.quality import QualitySettings, conversation_rule

FIELDS = ("instruction", "reference", "focus_points")
TURNS = range(1, len(LEVELS) + 1)


COMMENT = """
      <TextArea name="comment" toName="image" placeholder="Anything to add?" rows="2" maxSubmissions="1"/>"""


def label_config(settings: ReviewSettings) -> str:
    """The Label Studio XML for reviewing a conversation: per turn, three editable text areas that start
    with the generated text; then keep or discard with reasons."""
    turns = "\n".join(f"""  <View style="margin-top: 1em">
    <Header value="Turn {n} ($level_{n})" size="4"/>
    <Header value="Instruction" size="6"/>
    <TextArea name="instruction_{n}" toName="image" value="$instruction_{n}" rows="2" editable="true" maxSubmissions="1"/>
    <Header value="Reference answer" size="6"/>
    <TextArea name="reference_{n}" toName="image" value="$reference_{n}" rows="4" editable="true" maxSubmissions="1"/>
    <Header value="Focus points (one per line)" size="6"/>
    <TextArea name="focus_points_{n}" toName="image" value="$focus_points_{n}" rows="3" editable="true" maxSubmissions="1"/>
  </View>""" for n in TURNS)
    return f"""<View>
  <Image name="image" valueList="$images" maxWidth="100%"/>
{turns}
{keep_or_discard("conversation", settings.conversation_discard_reasons, COMMENT)}
</View>
"""


def to_task(conversation: Conversation, item, base: str) -> dict:
    data: dict = {"conversation_id": conversation.id, "item_id": conversation.item_id,
                  "images": image_urls(item, base)}
    for n, turn in zip(TURNS, conversation.final_turns):
        data |= {f"level_{n}": turn.level, f"instruction_{n}": turn.instruction, f"reference_{n}": turn.reference,
                 f"focus_points_{n}": "\n".join(turn.focus_points)}
    return {"data": data}


def to_review(task: dict, annotation: dict, settings: ReviewSettings) -> ConversationReview:
    """One annotation as a review version: each field as edited, or as sent when left alone."""
    picked, lines = results(annotation)
    texts = {name: "\n".join(text).strip() for name, text in lines.items()}
    data = task["data"]

    def field_text(name: str) -> str:
        return texts.get(name, data.get(name, ""))

    turns = [Turn(level=data[f"level_{n}"], task="", instruction=field_text(f"instruction_{n}"),
                  reference=field_text(f"reference_{n}"),
                  focus_points=[p.strip() for p in field_text(f"focus_points_{n}").splitlines() if p.strip()])
             for n in TURNS]
    keep = picked.get("keep", [KEEP])[0] == KEEP
    reason_keys = {label: key for key, label in settings.conversation_discard_reasons.items()}
    unknown = [label for label in picked.get("reasons", []) if label not in reason_keys]
    if unknown:
        raise ValueError(f"task {task['id']}, annotation {annotation['id']}: unknown discard reason {unknown[0]!r}")
    return ConversationReview(
        conversation_id=data["conversation_id"], task_id=task["id"], annotation_id=annotation["id"],
        annotator=annotator_of(annotation), keep=keep, reasons=[] if keep else [reason_keys[r] for r in picked.get("reasons", [])],
        comment="" if keep else texts.get("comment", ""), turns=turns,
        submitted_at=saved_at(annotation))


# -- push ---------------------------------------------------------------------------------------------

def ensure_project(server: Server, settings: Settings, review: ReviewSettings) -> tuple[int, bool]:
    """The conversation project (`review.conversation_project`), created or updated: (id, created)."""
    fields = dict(label_config=label_config(review), maximum_annotations=review.overlap,
                  expert_instruction=review.instructions, show_instruction=bool(review.instructions))
    return open_project(server, settings, review, review.conversation_project, fields)


@dataclass(frozen=True)
class ConversationTasks:
    """Conversations as review tasks (the push stage `review:push:conversations`)."""

    base: str
    review: ReviewSettings
    name: str = "review:push:conversations"
    kind: str = "conversation"
    key: str = "conversation_id"
    round: str = ""

    def task(self, conversation: Conversation, item: Image) -> dict:
        return to_task(conversation, item, self.base)

    @property
    def title(self) -> str:
        return self.review.conversation_project

    def project(self, server: Server, settings: Settings) -> tuple[int, bool]:
        """`review.conversation_project`, with the conversation labeling config: (id, created)."""
        return ensure_project(server, settings, self.review)


def push(store: Store, server: Server, settings: Settings,
         progress: Callable[[int], None] = lambda n: None) -> PushReport:
    """Send every candidate conversation (they passed the generation gate) to Label Studio, once each."""
    review = settings.section("review", ReviewSettings)
    tasks = ConversationTasks(image_base(settings, review), review)
    project_id, created = tasks.project(server, settings)
    stage = PushStage(server, tasks, project_id, store.get_conversations(status="candidate"), review.batch_size)
    done = runner.run(stage, store, progress=progress)
    return PushReport(project_id, created, done.counters["sent"], done.counters["recovered"], "conversation")


# -- pull and decide ---------------------------------------------------------------------------------

def fetch(store: Store, server: Server, review: ReviewSettings) -> tuple[list[ConversationReview], list[str]]:
    """Every version of every annotation on the pushed conversations now on the server, and why any
    annotation could not be read."""
    pushed = store.get_review_tasks("conversation")
    projects = {project for project, task in pushed.values() if task is not None}
    versions, unreadable = read_annotations(server, projects, "conversation_id",
                                            lambda task, annotation: to_review(task, annotation, review))
    return [v for v in versions if v.conversation_id in pushed], unreadable


@dataclass(frozen=True)
class Conversations(Kind):
    """Conversations as a kind of reviewed item: the latest submitted version decides. Kept, it sets the
    reviewed turns, unless the edit breaks the conversation's structure (then it is held, saying why);
    discarded, the conversation is rejected."""

    quality: QualitySettings  # the generation gate's rules, which a reviewed edit must pass too
    name: str = "conversation"

    @classmethod
    def of(cls, settings: Settings) -> Conversations:
        from generators.stage import GenerateSettings

        return cls(settings.section("generate", GenerateSettings).quality)

    def items(self, store: Store, statuses, ids=None) -> list[Conversation]:
        return store.get_conversations(status=list(statuses), ids=ids)

    def reviews(self, store: Store, items) -> dict[str, list[ConversationReview]]:
        out: dict[str, list[ConversationReview]] = {}
        for version in store.get_reviews([c.id for c in items], kind="conversation"):
            out.setdefault(version.conversation_id, []).append(version)
        return out

    def decide(self, conversation: Conversation, versions) -> Decision:
        if not versions:
            return Decision("waiting")
        latest = max(versions, key=lambda v: (v.submitted_at, v.annotation_id))
        details = {"annotation_id": latest.annotation_id, "review": latest.id}
        if not latest.keep:
            return Decision("rejected", "discarded: " + (", ".join(latest.reasons) or "no reason given"),
                            details=details)
        turns = [t.model_copy(update={"task": g.task}) for t, g in zip(latest.turns, conversation.turns)]
        rule, reason = conversation_rule(conversation.model_copy(update={"review_turns": turns}), self.quality)
        if rule:
            return Decision("flagged", f"the reviewed version fails {rule}: {reason}", details=details)
        return Decision("accepted", "kept in review", {"review_turns": [t.model_dump() for t in turns]}, details)

    def reviewed(self, conversation: Conversation) -> dict:
        return {"review_turns": [t.model_dump() for t in conversation.final_turns]}

    def revision(self, conversation: Conversation, before: dict, after: dict) -> str:
        edited = [f"turn {n} {name.replace('_', ' ')}" for n, old, new in zip(TURNS, before["review_turns"],
                                                                              after["review_turns"])
                  for name in FIELDS if old[name] != new[name]]
        return "edited in review: " + (", ".join(edited) or "no field")
