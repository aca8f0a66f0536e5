"""Human review of conversations in Label Studio: annotators read the picture and the three turns, edit
each turn's instruction, reference answer and focus points where needed, and keep or discard the
conversation with a reason.

Conversations go to a project of their own (`review.conversation_project`), pushed the way questions are:
an intent row before each batch, the server's task ids after, unconfirmed intents looked up on the server
before anything is sent again. Each text area starts with the generated text; a field an annotator leaves
alone comes back as it was.

A pull stores every version of every annotation (an annotation edited in Label Studio since the last pull
is a new version; none replaces another) and decides each conversation from the latest submission: kept,
the conversation is accepted with that version's turns (the last accepted edit wins); discarded, it is
rejected with the reasons. An edit that breaks the structure (an emptied reference, an instruction that
now gives an earlier answer away) is not accepted: the conversation waits in review with a verdict
saying why, until an annotator fixes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from annotation.client import Server, submitted_annotations
from annotation.labeling import KEEP, annotator_of, image_urls, keep_or_discard
from annotation.push import image_base, open_project, run_push
from annotation.settings import ReviewSettings
from benchsmith.records import LEVELS, Conversation, ConversationReview, Image, Turn, Verdict
from benchsmith.settings import Settings
from benchsmith.store import Store
from generators.quality import QualitySettings, conversation_rule

STAGE = "review"
RULE = "human_review"
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


def _when(value: str | None) -> datetime:
    return datetime.fromisoformat((value or "1970-01-01T00:00:00+00:00").replace("Z", "+00:00"))


def to_review(task: dict, annotation: dict, settings: ReviewSettings) -> ConversationReview:
    """One annotation as a review version: each field as edited, or as sent when left alone."""
    texts: dict[str, str] = {}
    picked: dict[str, list[str]] = {}
    for result in annotation.get("result", []):
        value = result.get("value", {})
        if "text" in value:
            texts[result["from_name"]] = "\n".join(value["text"]).strip()
        elif "choices" in value:
            picked[result["from_name"]] = value["choices"]
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
        submitted_at=_when(annotation.get("updated_at") or annotation.get("created_at")))


# -- push ---------------------------------------------------------------------------------------------

def ensure_project(server: Server, settings: Settings, review: ReviewSettings) -> int:
    fields = dict(label_config=label_config(review), maximum_annotations=review.overlap,
                  expert_instruction=review.instructions, show_instruction=bool(review.instructions))
    return open_project(server, settings, review, review.conversation_project, fields)[0]


@dataclass
class PushReport:
    project_id: int
    sent: int = 0
    recovered: int = 0

    def summary(self) -> str:
        return (f"conversation project {self.project_id}: {self.sent} tasks sent, {self.recovered} recovered from an "
                "interrupted push")


@dataclass(frozen=True)
class ConversationTasks:
    """Conversations as review tasks (the push stage `review:push:conversations`)."""

    base: str
    name: str = "review:push:conversations"
    key: str = "conversation_id"
    round: str = ""

    def subject_id(self, conversation: Conversation) -> str:
        return conversation.id

    def item_id(self, conversation: Conversation) -> str:
        return conversation.item_id

    def task(self, conversation: Conversation, item: Image) -> dict:
        return to_task(conversation, item, self.base)

    def recorded(self, store: Store, ids: Sequence[str]) -> dict[str, tuple[int, int | None]]:
        wanted = set(ids)
        return {cid: row for cid, row in store.get_conversation_review_tasks().items() if cid in wanted}

    def record_intents(self, store: Store, ids: Sequence[str], project_id: int) -> None:
        store.record_conversation_review_intents(ids, project_id)

    def record_task_ids(self, store: Store, task_ids: Mapping[str, int]) -> None:
        store.set_conversation_review_task_ids(task_ids)

    def to_review(self, store: Store, ids: Sequence[str], project_id: int) -> None:
        store.move_conversations(ids, "in_review", stage=STAGE, reason=f"sent to Label Studio project {project_id}")


def push(store: Store, server: Server, settings: Settings,
         progress: Callable[[int], None] = lambda n: None) -> PushReport:
    """Send every candidate conversation (they passed the generation gate) to Label Studio, once each."""
    review = settings.section("review", ReviewSettings)
    project_id = ensure_project(server, settings, review)
    done = run_push(store, server, ConversationTasks(image_base(settings, review)), project_id,
                    store.get_conversations(status="candidate"), review.batch_size, progress)
    return PushReport(project_id, sent=done.counters["sent"], recovered=done.counters["recovered"])


# -- pull and reconcile -------------------------------------------------------------------------------

@dataclass
class PullReport:
    new_versions: int = 0
    unreadable: list[str] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        outcomes = ", ".join(f"{self.outcomes[k]} {k}" for k in ("accepted", "edited", "rejected", "held", "waiting"))
        unreadable = f"; {len(self.unreadable)} annotations not understood" if self.unreadable else ""
        return f"{self.new_versions} new review versions of conversations; {outcomes}{unreadable}"


def fetch(server: Server, project_ids: set[int], review: ReviewSettings) -> tuple[list[ConversationReview], list[str]]:
    out, unreadable = [], []
    for task, annotation in submitted_annotations(server, project_ids, "conversation_id"):
        try:
            out.append(to_review(task, annotation, review))
        except ValueError as exc:
            unreadable.append(str(exc))
    return out, unreadable


def decide(conversation: Conversation, versions: Sequence[ConversationReview],
           quality: QualitySettings) -> tuple[str, ConversationReview | None, str]:
    """(outcome, deciding version, reason): `waiting` without a review; else the latest submission
    decides: `rejected` when it discards, `held` when its edit breaks the structure, `accepted` otherwise."""
    if not versions:
        return "waiting", None, ""
    latest = max(versions, key=lambda v: (v.submitted_at, v.annotation_id))
    if not latest.keep:
        return "rejected", latest, "discarded: " + (", ".join(latest.reasons) or "no reason given")
    edited = conversation.model_copy(update={"review_turns": _with_tasks(conversation, latest.turns)})
    rule, reason = conversation_rule(edited, quality)
    if rule:
        return "held", latest, f"the reviewed version fails {rule}: {reason}"
    return "accepted", latest, "kept in review"


def _with_tasks(conversation: Conversation, turns: Sequence[Turn]) -> list[Turn]:
    """Reviewed turns keep the generated task names (annotators do not edit them)."""
    return [t.model_copy(update={"task": g.task}) for t, g in zip(turns, conversation.turns)]


def reconcile(store: Store, settings: Settings) -> PullReport:
    """Decide every conversation in review (and update accepted ones edited since) from the stored versions."""
    from generators.stage import GenerateSettings

    quality = settings.section("generate", GenerateSettings).quality
    conversations = store.get_conversations(status=["in_review", "accepted"])
    versions: dict[str, list[ConversationReview]] = {}
    for version in store.get_conversation_reviews([c.id for c in conversations]):
        versions.setdefault(version.conversation_id, []).append(version)
    report = PullReport()
    for conversation in conversations:
        outcome, latest, reason = decide(conversation, versions.get(conversation.id, []), quality)
        verdict = Verdict(subject_id=conversation.id, subject_kind="conversation", stage=STAGE, rule=RULE,
                          passed=outcome == "accepted", reason=reason,
                          details={"annotation_id": latest.annotation_id, "review": latest.id} if latest else {})
        if conversation.status == "accepted":
            if outcome == "accepted" and _with_tasks(conversation, latest.turns) != conversation.final_turns:
                store.set_conversation_review_turns(conversation.id, _with_tasks(conversation, latest.turns))
                store.add_verdicts([verdict])
                report.outcomes["edited"] += 1
            continue
        report.outcomes[outcome] += 1
        if outcome == "accepted":
            store.move_conversations([conversation.id], "accepted", stage=STAGE, reason=reason, verdicts_to_add=[verdict],
                                     updates={conversation.id: {"review_turns": _with_tasks(conversation, latest.turns)}})
        elif outcome == "rejected":
            store.move_conversations([conversation.id], "rejected", stage=STAGE, reason=reason,
                                     verdicts_to_add=[verdict])
        elif outcome == "held":
            store.add_verdicts([verdict])
    return report


def pull(store: Store, server: Server, settings: Settings) -> PullReport:
    review = settings.section("review", ReviewSettings)
    pushed = store.get_conversation_review_tasks()
    projects = {project for project, task in pushed.values() if task is not None}
    fetched, unreadable = fetch(server, projects, review)
    new = store.add_conversation_reviews([v for v in fetched if v.conversation_id in pushed])
    report = reconcile(store, settings)
    report.new_versions, report.unreadable = new, unreadable
    return report
