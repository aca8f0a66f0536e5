"""White-box ranking with a tiny random LLaVA saved to disk and loaded through the production path."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from evaluation.adapters import EvalError, VlmLikelihoodConfig
from evaluation.adapters.likelihood import LikelihoodAdapter
from evaluation.protocols import ProtocolSettings, passes
from evaluation.records import EvalQuestion
from evaluation.sources import Source, from_folder
from evaluation.stage import evaluate, prepare
from evaluation.templates import load_templates
from tests.evaluation.conftest import with_evaluate
from tests.evaluation.tiny_vlms import save_tiny_llava


def png(colour: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (48, 40), colour).save(out, "PNG")
    return out.getvalue()


QUESTIONS = [
    EvalQuestion("q1", "What colour is the square?", ("red", "dark blue", "green", "a pale yellow"), 0, "attr",
                 frames=(png("red"),), content_hash="1"),
    EvalQuestion("q2", "How many circles are there in the picture?", ("one", "two", "three", "four"), 2, "count",
                 frames=(png("blue"),), content_hash="2"),
    EvalQuestion("q3", "Where is the star?", ("top left", "in the middle of the image", "bottom", "right"), 1,
                 "loc", frames=(png("green"),), content_hash="3"),
]
VIDEO = EvalQuestion("v1", "Which colour comes last?", ("red", "green", "blue", "white"), 2, "order",
                     data_type="video", frames=tuple(png(c) for c in ("red", "green", "blue")), content_hash="4")


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    return str(save_tiny_llava(tmp_path_factory.mktemp("llava")))


def adapter(model: str, **options) -> LikelihoodAdapter:
    return LikelihoodAdapter("tiny", VlmLikelihoodConfig(kind="likelihood", model=model, device="cpu", **options),
                             load_templates())


def reference_mean_logp(ranker: LikelihoodAdapter, p, option: str) -> float:
    """Minus transformers' own loss on the option's tokens alone: the mean log-likelihood, computed
    one (question, option) at a time without padding."""
    import torch

    images = p.question.images(8)
    prefix = ranker.prefix(p, len(images))
    start = len(ranker.processor(text=[prefix], images=images, return_tensors="pt")["input_ids"][0])
    inputs = ranker.processor(text=[f"{prefix} {option}"], images=images, return_tensors="pt")
    labels = inputs["input_ids"].clone()
    labels[:, :start] = -100
    with torch.inference_mode():
        return -float(ranker.model(**inputs, labels=labels).loss)


def test_scores_match_the_models_own_loss_one_option_at_a_time(llava):
    ranker = adapter(llava, normalise="mean", batch_size=3)
    answers = dict(ranker.predict(passes(QUESTIONS, "single", ProtocolSettings())))
    for p, answer in answers.items():
        expected = [reference_mean_logp(ranker, p, option) for option in p.options]
        assert answer.scores == pytest.approx(expected, abs=1e-4)
        assert answer.choice == max(range(4), key=expected.__getitem__) and answer.matched_by == "likelihood"


def test_batching_does_not_change_scores_and_sum_differs_from_mean(llava):
    shown = passes(QUESTIONS, "circular", ProtocolSettings())
    one = {p.subject: a.scores for p, a in adapter(llava, batch_size=1).predict(shown)}
    many = {p.subject: a.scores for p, a in adapter(llava, batch_size=8).predict(shown)}
    assert one.keys() == many.keys()
    for subject in one:
        assert one[subject] == pytest.approx(many[subject], abs=1e-4)
    means = {p.subject: a.scores for p, a in adapter(llava, normalise="mean").predict(shown)}
    first = shown[0]   # "a pale yellow" is more than two tokens: its sum is below twice its mean
    assert one[first.subject][3] < means[first.subject][3] * 2


def test_video_questions_get_frames_or_a_recorded_skip(llava):
    [(_, skipped)] = list(adapter(llava, video=False).predict(passes([VIDEO], "single", ProtocolSettings())))
    assert skipped.skipped.startswith("a video question (3 frames)") and skipped.choice is None
    [(_, answered)] = list(adapter(llava, max_frames=2).predict(passes([VIDEO], "single", ProtocolSettings())))
    assert answered.choice is not None and len(answered.scores) == 4


def test_a_model_that_cannot_load_is_one_line(tmp_path):
    with pytest.raises(EvalError, match="cannot load evaluation model '.*nothing-here'"):
        list(adapter(str(tmp_path / "nothing-here")).predict(passes(QUESTIONS[:1], "single", ProtocolSettings())))


def test_a_release_evaluated_with_a_local_vlm(published, tmp_path, llava):
    questions = from_folder(published.folder)
    settings = with_evaluate(published.settings, tmp_path, {"models": {"tiny-llava": {
        "kind": "likelihood", "model": llava, "device": "cpu", "video": False}}})
    stage = prepare(published.store, settings, Source("release:v1", questions), "tiny-llava")
    report = evaluate(published.store, settings, stage)
    rows = published.store.predictions([stage.run.id])
    videos = {q.question_id for q in questions if q.data_type == "video"}
    assert len(rows) == len(questions) and report.counters["skipped"] == len(videos) == 1
    assert {r["question_id"] for r in rows if r["status"] == "skipped"} == videos
    assert all(r["matched_by"] == "likelihood" and len(r["scores"]) == 4 for r in rows if r["status"] == "ok")
    again = evaluate(published.store, settings, prepare(published.store, settings, Source("release:v1", questions),
                                                         "tiny-llava"))
    assert again.pending == 0 and again.done == 0
