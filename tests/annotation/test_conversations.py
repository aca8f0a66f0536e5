"""Conversations through a real Label Studio: pushed once each (even after a push that died half-way),
edited and kept or discarded by annotators through the API, pulled back with every version kept and
the last accepted edit winning."""

from __future__ import annotations

import time
import uuid

from label_studio_sdk import LabelStudio
from PIL import Image as PILImage

from annotation import conversations as review_conversations
from annotation.client import connect
from annotation.pull import pull
from annotation.push import image_base
from annotation.settings import ReviewSettings
from benchsmith.dimensions import registry
from benchsmith.records import Conversation, Image, Provenance, Turn, sha256_bytes
from benchsmith.store import Store


def seed_conversations(store, settings, n: int, turns: list[Turn] | None = None) -> list[Conversation]:
    """`n` conversations, each on its own small image; with `turns`, every one has those."""
    settings.media_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for k in range(n):
        path = settings.media_dir / f"conv{k}.png"
        PILImage.new("RGB", (40, 30), (30 * k, 90, 160)).save(path)
        image = Image(id=sha256_bytes(path.read_bytes()), path=path.name, width=40, height=30)
        store.add_items([image])
        generated = [Turn(level="perception", task="counting", instruction=f"How many squares are there? ({k})",
                          reference="Two squares.", focus_points=["says two"]),
                     Turn(level="reasoning", task="comparison", instruction="Which of them is nearer the edge?",
                          reference="The left one.", focus_points=["names the left square", "says why"]),
                     Turn(level="creation", task="poem", instruction="Write a couplet about the pair.",
                          reference="Two squares sit side by side.", focus_points=["two lines"])]
        made.append(Conversation(item_id=image.id, turns=turns or generated, provenance=Provenance(backend="conversation")))
    store.add_conversations(made, stage="generate")
    return made


def text(name: str, value: str) -> dict:
    return {"from_name": name, "to_name": "image", "type": "textarea", "value": {"text": [value]}}


def choice(name: str, values: list[str]) -> dict:
    return {"from_name": name, "to_name": "image", "type": "choices", "value": {"choices": values}}


def test_edited_conversations_round_trip_and_the_last_accepted_edit_wins(label_studio, annotators):
    settings = label_studio.settings(overlap=2, conversation_project=f"conversations {uuid.uuid4().hex[:8]}")
    review = settings.section("review", ReviewSettings)
    server = connect(settings)
    with Store(settings.db_url) as store:
        edited, discarded, broken, interrupted = seed_conversations(store, settings, 4)

        # a push that died after its import but before it recorded the task id
        project, _created = review_conversations.ensure_project(server, settings, review)
        store.record_review_intents("conversation", [interrupted.id], project)
        item = store.get_items([interrupted.item_id])[0]
        server.import_tasks(project, [review_conversations.to_task(interrupted, item, image_base(settings, review))])

        first = review_conversations.push(store, server, settings)
        assert (first.sent, first.recovered) == (3, 1)
        assert review_conversations.push(store, server, settings).sent == 0
        tasks = {cid: task for cid, (_p, task) in store.get_review_tasks("conversation").items()}
        assert len(set(tasks.values())) == 4
        assert {c.status for c in store.get_conversations()} == {"in_review"}

        first_annotator, second_annotator = (LabelStudio(base_url=label_studio.url, api_key=token)
                                             for token in annotators.values())
        data = first_annotator.tasks.get(id=tasks[edited.id]).data
        assert data["reference_2"] == "The left one." and data["focus_points_2"] == "names the left square\nsays why"
        kept = first_annotator.annotations.create(id=tasks[edited.id], result=[
            text("reference_2", "The left one, as it touches the border."), choice("keep", ["Keep"])])
        first_annotator.annotations.create(id=tasks[discarded.id], result=[
            choice("keep", ["Discard"]), choice("reasons", [review.conversation_discard_reasons["wrong_reference"]]),
            text("comment", "there are three squares")])
        first_annotator.annotations.create(id=tasks[broken.id], result=[text("reference_1", " "),
                                                                         choice("keep", ["Keep"])])

        report = pull(store, server, settings, registry())
        assert report.new_reviews == 3 and report.unreadable == []
        assert {k: report.conversations[k] for k in ("accepted", "rejected", "flagged", "waiting")} == {
            "accepted": 1, "rejected": 1, "flagged": 1, "waiting": 1}
        (accepted,) = store.get_conversations(ids=[edited.id])
        assert accepted.status == "accepted"
        assert accepted.final_turns[1].reference == "The left one, as it touches the border."
        assert accepted.turns[1].reference == "The left one." and accepted.final_turns[1].task == "comparison"
        assert accepted.final_turns[0] == edited.turns[0]            # untouched fields come back as sent
        (rejected,) = store.get_conversations(ids=[discarded.id])
        assert rejected.status == "rejected"
        assert store.events(discarded.id)[-1]["reason"] == "discarded: wrong_reference"
        (held,) = store.get_conversations(ids=[broken.id])
        assert held.status == "in_review"
        verdict = store.get_verdicts(stage="review", subject_id=broken.id)[0]
        assert not verdict.passed and "empty_field" in verdict.reason

        time.sleep(1.1)  # Label Studio stamps updates to the second
        first_annotator.annotations.update(id=kept.id, result=[
            text("reference_2", "The left square: it touches the border."), choice("keep", ["Keep"])])
        second_annotator.annotations.create(id=tasks[broken.id], result=[
            text("reference_1", "Two squares, one blue."), choice("keep", ["Keep"])])
        again = pull(store, server, settings, registry())
        assert again.new_reviews == 2 and again.conversations["revised"] == 1 and again.conversations["accepted"] == 1
        (accepted,) = store.get_conversations(ids=[edited.id])
        assert accepted.final_turns[1].reference == "The left square: it touches the border."
        versions = store.get_reviews([edited.id], kind="conversation", every_version=True)
        assert [v.turns[1].reference for v in versions] == ["The left one, as it touches the border.",
                                                            "The left square: it touches the border."]
        (fixed,) = store.get_conversations(ids=[broken.id])
        assert fixed.status == "accepted" and fixed.final_turns[0].reference == "Two squares, one blue."
        assert len(store.get_reviews([broken.id], kind="conversation", every_version=True)) == 2

        assert pull(store, server, settings, registry()).new_reviews == 0
