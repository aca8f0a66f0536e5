"""White-box ranking with tiny random LLaVA and Idefics3 models saved to disk and loaded through the
production path: the batched, shared-prefix scores against the one-pass-per-option reference."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from PIL import Image

from benchsmith.models import ModelError
from evaluation.adapters import VlmLikelihoodConfig
from evaluation.adapters.likelihood import LikelihoodAdapter
from evaluation.contract import configured, protocol
from evaluation.protocols import Instability, InstabilitySettings
from evaluation.records import EvalQuestion
from evaluation.sources import Source, from_folder
from evaluation.stage import evaluate, passes
from evaluation.templates import load_templates
from filters.solvers import choose
from filters.solvers.option_scoring import option_ids, reduce
from tests.evaluation.conftest import with_evaluate
from tests.evaluation.tiny_vlms import qwen2_vl_images_only, save_tiny_idefics3, save_tiny_llava, save_tiny_qwen2_vl
from tests.filters.solvers.tiny_models import save_tiny_causal


def png(colour: str, size: tuple[int, int] = (48, 40)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "PNG")
    return out.getvalue()


QUESTIONS = [
    EvalQuestion("q1", "What colour is the square?", ("red", "dark blue", "green", "a pale yellow"), 0, "attr",
                 frames=(png("red"),), content_hash="1"),
    EvalQuestion("q2", "How many circles are there in the picture?", ("one", "two", "three", "four"), 2, "count",
                 frames=(png("blue"),), content_hash="2"),
    EvalQuestion("q3", "Where is the star?", ("top left", "in the middle of the image", "bottom", "right"), 1,
                 "loc", frames=(png("green", (64, 30)),), content_hash="3"),
    EvalQuestion("q4", "Is it a cat?", ("yes", "no", "the quick brown fox jumps over the lazy dog", ""), 1,
                 "odd", frames=(png("white"),), content_hash="5"),
]
VIDEO = EvalQuestion("v1", "Which colour comes last?", ("red", "green", "blue", "white"), 2, "order",
                     data_type="video", frames=tuple(png(c) for c in ("red", "green", "blue")), content_hash="4")
IMAGE_SET = EvalQuestion("s1", "Which image is blue?", ("image 1", "image 2", "image 3", "none of them"), 1,
                         "odd", data_type="image_set", frames=tuple(png(c) for c in ("red", "blue", "green")),
                         content_hash="6")

MAKERS = {"llava": save_tiny_llava, "idefics3": save_tiny_idefics3}


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    return str(save_tiny_llava(tmp_path_factory.mktemp("llava")))


@pytest.fixture(scope="module", params=sorted(MAKERS))
def vlm(request, tmp_path_factory):
    return str(MAKERS[request.param](tmp_path_factory.mktemp(request.param)))


def adapter(model: str, **options) -> LikelihoodAdapter:
    return LikelihoodAdapter("tiny", VlmLikelihoodConfig(kind="likelihood", model=model, device="cpu", **options),
                             load_templates())


def answers_of(ranker: LikelihoodAdapter, shown) -> dict:
    return {p.subject: a for p, a in ranker.predict(shown)}


def reference_mean_logp(ranker: LikelihoodAdapter, p, option: str) -> float:
    """Minus transformers' own loss on the option's tokens alone: the mean log-likelihood, computed
    one (question, option) at a time without padding, from the joined text."""
    import torch

    images = p.question.images(8)
    prefix = ranker.prefix(p, len(images))
    start = len(ranker.processor(text=[prefix], images=images, return_tensors="pt")["input_ids"][0])
    inputs = ranker.processor(text=[f"{prefix} {option}"], images=images, return_tensors="pt")
    labels = inputs["input_ids"].clone()
    labels[:, :start] = -100
    with torch.inference_mode():
        return -float(ranker.model(**inputs, labels=labels).loss)


@pytest.mark.parametrize("share_prompt", [True, False])
def test_scores_match_the_models_own_loss_one_option_at_a_time(llava, share_prompt):
    ranker = adapter(llava, normalise="mean", batch_size=3, share_prompt=share_prompt)
    answers = dict(ranker.predict(passes(QUESTIONS[:3], protocol("single"))))
    for p, answer in answers.items():
        expected = [reference_mean_logp(ranker, p, option) for option in p.options]
        assert answer.scores == pytest.approx(expected, abs=1e-4)
        assert answer.choice == max(range(4), key=expected.__getitem__) and answer.matched_by == "likelihood"


def scores_through(ranker: LikelihoodAdapter, path, shown) -> dict[str, list[float]]:
    """Each pass's option scores from one scoring path of the adapter (`ranker.shared`, `ranker.joined`),
    called directly on the batches the adapter makes."""
    import torch

    out = {}
    with torch.inference_mode():
        for batch in ranker.batches(shown):
            result = path(batch)
            assert result is not None, "the model's cache could not be shared"
            scores = reduce(*result, ranker.config.normalise).view(len(batch), -1).tolist()
            out.update({p.subject: row for p, row in zip(batch, scores)})
    return out


def test_the_shared_prefix_batches_give_the_reference_loops_scores(vlm):
    shown = passes([*QUESTIONS, VIDEO], Instability(InstabilitySettings(templates=3, shuffles=2)))
    reference = answers_of(adapter(vlm, share_prompt=False, max_frames=2), shown)
    batched = adapter(vlm, batch_size=5, max_frames=2)
    batched.load()
    assert batched.shares_cache
    shared = scores_through(batched, batched.shared, shown)
    assert shared.keys() == reference.keys() and len(shared) == len(shown)
    for subject, answer in reference.items():
        assert answer.skipped == "" and len(answer.scores) == 4
        assert shared[subject] == pytest.approx(answer.scores, abs=1e-4)
        assert choose(shared[subject]) == answer.choice
    spread = {round(s, 3) for a in reference.values() for s in a.scores}
    assert len(spread) > 20   # a random model, not a constant one


def test_joined_rows_give_the_same_scores_for_models_that_cannot_share(vlm):
    shown = passes(QUESTIONS, protocol("circular"))
    reference = answers_of(adapter(vlm, share_prompt=False), shown)
    ranker = adapter(vlm, batch_size=3)
    ranker.load()
    joined = scores_through(ranker, ranker.joined, shown)
    for subject, answer in reference.items():
        assert joined[subject] == pytest.approx(answer.scores, abs=1e-4)
        assert choose(joined[subject]) == answer.choice


def test_mean_is_the_sum_over_the_options_token_count(llava):
    shown = passes(QUESTIONS, protocol("single"))
    ranker = adapter(llava, normalise="sum")
    sums = answers_of(ranker, shown)
    means = answers_of(adapter(llava, normalise="mean"), shown)
    counts = {p.subject: [len(ids) for ids in option_ids(ranker.processor.tokenizer, p.options)] for p in shown}
    assert any(c > 1 for row in counts.values() for c in row)
    for subject, total in sums.items():
        assert means[subject].scores == pytest.approx([s / c for s, c in zip(total.scores, counts[subject])],
                                                      abs=1e-4)
        assert all(s < 0 for s in total.scores)


def test_reordered_options_keep_each_options_score(llava):
    """The default template does not list the options, so the prefix is the same in every rotation:
    each original option keeps its score and the model keeps its original choice."""
    shown = passes(QUESTIONS, protocol("circular"))
    answers = dict(adapter(llava, batch_size=4).predict(shown))
    for q in QUESTIONS:
        rotations = [(p, a) for p, a in answers.items() if p.question is q]
        by_original = [dict(zip(p.order, a.scores)) for p, a in rotations]
        for scores in by_original[1:]:
            assert [scores[i] for i in range(4)] == pytest.approx([by_original[0][i] for i in range(4)], abs=1e-4)
        assert len({p.original(a.choice) for p, a in rotations}) == 1
        assert len({a.choice for _, a in rotations}) == 4   # so the shown position moves with the option


def test_video_questions_get_frames_or_a_recorded_skip(vlm):
    [(_, skipped)] = list(adapter(vlm, video=False).predict(passes([VIDEO], protocol("single"))))
    assert skipped.skipped.startswith("a question with 3 images (video)") and skipped.choice is None
    [(_, answered)] = list(adapter(vlm, max_frames=2).predict(passes([VIDEO], protocol("single"))))
    assert answered.choice is not None and len(answered.scores) == 4
    [(_, all_frames)] = list(adapter(vlm, max_frames=3).predict(passes([VIDEO], protocol("single"))))
    assert all_frames.scores != pytest.approx(answered.scores, abs=1e-6)


def test_an_image_set_is_ranked_on_every_image_in_order(vlm):
    single = protocol("single")
    [(_, reference)] = list(adapter(vlm, share_prompt=False).predict(passes([IMAGE_SET], single)))
    [(_, capped)] = list(adapter(vlm, max_frames=1).predict(passes([IMAGE_SET], single)))
    assert capped.scores == pytest.approx(reference.scores, abs=1e-4)      # max_frames spreads videos only
    reordered = replace(IMAGE_SET, frames=IMAGE_SET.frames[::-1], content_hash="7")
    [(_, other)] = list(adapter(vlm).predict(passes([reordered], single)))
    assert other.scores != pytest.approx(reference.scores, abs=1e-6)
    [(_, skipped)] = list(adapter(vlm, video=False).predict(passes([IMAGE_SET], single)))
    assert skipped.skipped.startswith("a question with 3 images (image_set) and model")


def test_a_model_that_refuses_several_images_skips_the_video_and_the_set(llava):
    class OneImageOnly:
        """The model's processor, failing on more than one image as single-image processors do."""

        def __init__(self, processor):
            self.processor = processor

        def __getattr__(self, name):
            return getattr(self.processor, name)

        def __call__(self, *, text, images, **kwargs):
            if any(len(row) > 1 for row in images):
                raise ValueError("this model takes one image per prompt")
            return self.processor(text=text, images=images, **kwargs)

    ranker = adapter(llava)
    ranker.load()
    ranker.processor = OneImageOnly(ranker.processor)
    answers = {p.question.question_id: a for p, a in ranker.predict(passes([VIDEO, IMAGE_SET, QUESTIONS[0]],
                                                                         protocol("single")))}
    for several in ("v1", "s1"):
        assert answers[several].skipped.endswith("cannot take 3 images: this model takes one image per prompt")
    assert answers["q1"].choice is not None


def test_a_model_that_cannot_load_is_one_line(tmp_path):
    with pytest.raises(ModelError, match="evaluation model 'tiny'.*nothing-here.*evaluate.models.tiny.model"):
        list(adapter(str(tmp_path / "nothing-here")).predict(passes(QUESTIONS[:1], protocol("single"))))
    text_only = str(save_tiny_causal(tmp_path / "text-only"))
    with pytest.raises(ModelError, match="evaluation model 'tiny' cannot load model .*text-only: ValueError: "
                                         "Unrecognized configuration class") as error:
        list(adapter(text_only).predict(passes(QUESTIONS[:1], protocol("single"))))
    assert "\n" not in str(error.value)


def test_a_release_evaluated_with_a_local_vlm(published, tmp_path, llava):
    questions = from_folder(published.folder)
    settings = with_evaluate(published.settings, tmp_path, {"models": {"tiny-llava": {
        "kind": "likelihood", "model": llava, "device": "cpu", "video": False}}})
    source = Source("release:v1", questions)
    stage = configured(settings).stage(published.store, settings, source, "tiny-llava")
    report = evaluate(published.store, stage)
    rows = published.store.predictions([stage.run.id])
    several = {q.question_id for q in questions if q.data_type in ("video", "image_set")}   # video: false
    assert len(rows) == len(questions) and report.counters["skipped"] == len(several) == 2
    assert {r["question_id"] for r in rows if r["status"] == "skipped"} == several
    assert all(r["matched_by"] == "likelihood" and len(r["scores"]) == 4 for r in rows if r["status"] == "ok")
    again = evaluate(published.store, configured(settings).stage(published.store, settings, source, "tiny-llava"))
    assert again.pending == 0 and again.done == 0


def test_qwen2_vl_scores_joined_rows_as_the_reference_loop_and_its_own_loss(tmp_path):
    """Qwen2-VL computes its rotary positions from the image grid, so it cannot share a prefix cache and
    takes the joined rows. Its processor is built without the video part (torchvision is missing here),
    which the production loader reports in one line."""
    from transformers import AutoModelForImageTextToText

    folder = save_tiny_qwen2_vl(tmp_path / "qwen2-vl")
    with pytest.raises(ModelError, match="evaluation model 'tiny' cannot load model .*: ImportError: "
                                         "Qwen2VLVideoProcessor requires the Torchvision library") as error:
        list(adapter(str(folder)).predict(passes(QUESTIONS[:1], protocol("single"))))
    assert "\n" not in str(error.value)

    def loaded(**options) -> LikelihoodAdapter:
        ranker = adapter(str(folder), normalise="mean", **options)
        ranker.model = AutoModelForImageTextToText.from_pretrained(folder).eval()
        ranker.processor = qwen2_vl_images_only(folder)
        return ranker

    shown = passes(QUESTIONS, protocol("circular"))
    batched = loaded(batch_size=3)
    assert not batched.shares_cache
    joined = answers_of(batched, shown)
    reference = answers_of(loaded(share_prompt=False), shown)
    for subject, answer in reference.items():
        assert joined[subject].scores == pytest.approx(answer.scores, abs=1e-4)
        assert joined[subject].choice == answer.choice
    for p in shown[:4]:
        expected = [reference_mean_logp(batched, p, option) for option in p.options]
        assert joined[p.subject].scores == pytest.approx(expected, abs=1e-4)
    assert len({round(s, 3) for a in joined.values() for s in a.scores}) > 10   # a random model, not a constant one
