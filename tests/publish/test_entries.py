"""The published form of one question: reviewed answer and dimension, agreement, safe names."""

from __future__ import annotations

import pytest

from benchsmith.dimensions import registry
from publish.entries import agreement, entry_for, public_name
from benchsmith.records import Image, Provenance, Question, Video

PHOTO = Image(id="a" * 64, path="aa/photo.jpg", width=64, height=64, source="/data/private/photos")
CLIP = Video(id="b" * 64, path="bb/clip.mp4", frames=["frames/b/0.png", "frames/b/1.png"], source="clips")


def question(item_id: str, **review) -> Question:
    return Question(item_id=item_id, dimension_id=5, text="How many cups?", options=["1", "2", "3", "4"], answer=1,
                    provenance=Provenance(backend="llm", model="~/checkpoints/llava"), **review)


def test_the_annotators_answer_and_dimension_replace_the_generators():
    entry = entry_for(question(PHOTO.id, review_answer=3, review_dimension_id=2), PHOTO, [3, 3, 1], registry())
    assert (entry.answer, entry.question_type_id, entry.category, entry.config) == (
        "D", 2, "Instance Identity", "instance_identity")
    assert entry.agreement == pytest.approx(2 / 3) and entry.annotators == 3


def test_without_review_the_generated_answer_stands_and_agreement_is_empty():
    entry = entry_for(question(PHOTO.id), PHOTO, [], registry())
    assert (entry.answer, entry.question_type_id, entry.agreement, entry.annotators) == ("B", 5, None, 0)
    assert entry.media == ("aa/photo.jpg",) and entry.data_type == "image"


def test_a_video_question_shows_the_sampled_frames():
    entry = entry_for(question(CLIP.id), CLIP, [1], registry())
    assert entry.data_type == "video" and entry.media == ("frames/b/0.png", "frames/b/1.png")


def test_local_paths_never_become_published_names():
    entry = entry_for(question(PHOTO.id), PHOTO, [], registry())
    assert (entry.source, entry.model) == ("photos", "llava")
    assert public_name("Salesforce/blip2-opt-2.7b") == "Salesforce/blip2-opt-2.7b"
    assert public_name("C:\\models\\qwen") == "qwen" and public_name(None) == ""


def test_a_discarding_annotator_counts_against_agreement():
    assert agreement(2, [2, None]) == 0.5 and agreement(2, []) is None


def test_the_content_hash_follows_what_users_see():
    base = entry_for(question(PHOTO.id), PHOTO, [], registry())
    reviewed = entry_for(question(PHOTO.id), PHOTO, [1, 1], registry())
    assert base.content_hash == reviewed.content_hash          # agreement is provenance, not content
    changed = entry_for(question(PHOTO.id, review_answer=0), PHOTO, [], registry())
    assert changed.content_hash != base.content_hash
