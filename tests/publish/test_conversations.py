"""Accepted conversations in a release: their own config with one column per turn field, the reviewed
turns, counted on the card and recorded with the release."""

from __future__ import annotations

import json

import datasets
import yaml

from publish.release import publish
from benchsmith.records import Conversation, ConversationReview, Provenance, Turn, utcnow

WRITER = Provenance(backend="conversation", model="gpt-4o", prompt_version="conv-v1", tokens_in=900)


def three_turns(tag: str) -> list[Turn]:
    return [Turn(level="perception", task="counting", instruction=f"How many shapes are there? ({tag})",
                 reference="Three shapes.", focus_points=["says three"]),
            Turn(level="reasoning", task="comparison", instruction="Which of those is largest, and why?",
                 reference="The circle, it spans half the width.", focus_points=["names the circle", "gives size"]),
            Turn(level="creation", task="story writing", instruction="Tell a two-line story about them.",
                 reference="Three shapes met; the circle led.", focus_points=["two lines", "uses the circle"])]


def add_conversations(store, item_ids):
    """The first is accepted with an edited reasoning reference, the second accepted as generated, the
    third still in review, the fourth dropped."""
    made = [Conversation(item_id=item_id, turns=three_turns(str(n)), provenance=WRITER)
            for n, item_id in enumerate(item_ids)]
    store.add_conversations(made, stage="generate")
    store.move("conversation", [c.id for c in made[:3]], "in_review", stage="review")
    edited = three_turns("0")
    edited[1] = edited[1].model_copy(update={"reference": "The circle: it is twice the square's width."})
    store.add_reviews([ConversationReview(conversation_id=made[0].id, task_id=1, annotation_id=1,
                                                       annotator="a0", turns=edited, submitted_at=utcnow())])
    store.move("conversation", [made[0].id], "accepted", stage="review", updates_by_id={made[0].id: {"review_turns": edited}})
    store.move("conversation", [made[1].id], "accepted", stage="review")
    store.move("conversation", [made[3].id], "dropped", stage="generate", reason="leaked_reference")
    return made


def test_accepted_conversations_are_their_own_config_with_reviewed_turns(reviewed, tmp_path):
    items = sorted({q["item"] for q in reviewed.truth.values()})
    made = add_conversations(reviewed.store, items[:4])
    result = publish(reviewed.store, reviewed.settings, "v1")
    assert result.n_conversations == 2

    rows = {r["conversation_id"]: r for r in datasets.load_dataset(
        str(result.folder), "conversations", split="test", cache_dir=str(tmp_path / "cache"))}
    assert set(rows) == {made[0].id, made[1].id}
    edited, plain = rows[made[0].id], rows[made[1].id]
    assert edited["reference_2"] == "The circle: it is twice the square's width." and edited["annotators"] == 1
    assert plain["reference_2"] == "The circle, it spans half the width." and plain["annotators"] == 0
    assert [plain[f"level_{n}"] for n in (1, 2, 3)] == ["perception", "reasoning", "creation"]
    assert plain["task_3"] == "story writing" and plain["focus_points_2"] == ["names the circle", "gives size"]
    assert plain["instruction_1"] == "How many shapes are there? (1)" and plain["model"] == "gpt-4o"
    assert len(plain["image"]) == 1 and plain["data_id"] == items[1]
    # the question configs are untouched by it
    everything = datasets.load_dataset(str(result.folder), split="test", cache_dir=str(tmp_path / "cache"))
    assert "conversation_id" not in everything.column_names and len(everything) == len(reviewed.accepted_ids)

    card = (result.folder / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    assert {"config_name": "conversations", "data_files": [
        {"split": "test", "path": ["conversations/test-00000-of-00001.parquet"]}]} in meta["configs"]
    info = next(i for i in meta["dataset_info"] if i["config_name"] == "conversations")
    assert info["splits"][0]["num_examples"] == 2
    assert "and 2 three-turn conversations" in card and "story writing (2)" in card
    manifest = json.loads((result.folder / "release.json").read_text())
    assert manifest["n_conversations"] == 2 and set(manifest["conversations"]) == {made[0].id, made[1].id}
    assert reviewed.store.release_hashes("v1", "conversation") == manifest["conversations"]
    assert {c.status for c in reviewed.store.get_conversations(ids=[made[0].id, made[1].id])} == {"published"}
    assert reviewed.store.get_conversations(ids=[made[2].id])[0].status == "in_review"


def test_a_release_without_conversations_has_no_conversation_config(reviewed):
    result = publish(reviewed.store, reviewed.settings, "v1")
    card = (result.folder / "README.md").read_text()
    assert result.n_conversations == 0 and "conversations" not in card.split("---")[1]
    assert not (result.folder / "conversations").exists()
