"""Batched likelihood ranking with a vision-language model against the naive loop over each
(question, option) pair.

Target: on the same questions with the same small LLaVA, the evaluation's likelihood adapter with
`share_prompt: true` (questions batched, each image+prompt prefix run once and its key/value cache
shared by the four options) is >= 5x faster than `share_prompt: false` (one forward pass over image,
prompt and option per pair), and makes identical choices. The joined path (every pair its own padded
row, for models whose cache cannot be shared) is timed beside them. Each time is the median of
`repeats` runs; the ratio is measured in one run. Results: benchmarks/results/eval_likelihood.json.

    .venv/bin/python benchmarks/eval_likelihood.py            # 300 questions, 3 repeats
    .venv/bin/python benchmarks/eval_likelihood.py --quick    # 60 questions, 1 repeat
"""

from __future__ import annotations

import io
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.blind_leaks import oracle_questions  # noqa: E402
from benchmarks.common import arguments, byte_level_tokenizer, save, timed  # noqa: E402

IMAGE_SIZE, PATCH = 64, 8      # 64 image tokens per question, a prefix the image dominates as in LLaVA-1.5


def save_small_llava(folder: Path, texts: list[str]) -> Path:
    """A small random LLaVA (CLIP vision tower 2 layers width 64; LLaMA 4 layers width 128) with a
    byte-level BPE tokenizer trained on the questions, saved like any checkpoint."""
    import torch
    from transformers import (CLIPImageProcessorPil, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    tokenizer = byte_level_tokenizer(texts, ["<pad>", "<s>", "</s>", "<unk>", "<image>"], pad_token="<pad>",
                                     bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    torch.manual_seed(0)
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                                       num_attention_heads=4, image_size=IMAGE_SIZE, patch_size=PATCH,
                                       projection_dim=64),
        text_config=LlamaConfig(vocab_size=len(tokenizer), hidden_size=128, intermediate_size=512,
                                num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                                max_position_embeddings=1024, bos_token_id=1, eos_token_id=2, pad_token_id=0),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"), vision_feature_select_strategy="default",
        vision_feature_layer=-1)
    LlavaForConditionalGeneration(config).save_pretrained(folder)
    LlavaProcessor(image_processor=CLIPImageProcessorPil(size={"shortest_edge": IMAGE_SIZE},
                                                         crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}),
                   tokenizer=tokenizer, patch_size=PATCH, vision_feature_select_strategy="default",
                   image_token="<image>", num_additional_image_tokens=1).save_pretrained(folder)
    return folder


def noisy_png(rng: random.Random) -> bytes:
    from PIL import Image

    width, height = rng.choice([(320, 240), (240, 320), (256, 256)])
    image = Image.effect_noise((width, height), rng.uniform(20, 80)).convert("RGB")
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def eval_questions(n_questions: int):
    """The blind benchmarks' programmatic oracle questions, each with a photo-sized image."""
    from evaluation.records import EvalQuestion

    rng = random.Random(7)
    found = oracle_questions(max(20, n_questions // 4), seed=5)[:n_questions]
    assert len(found) == n_questions, f"only {len(found)} oracle questions; ask for fewer"
    return [EvalQuestion(f"q{i}", q.text, tuple(q.options), q.answer, str(q.dimension_id),
                         frames=(noisy_png(rng),), content_hash=str(i)) for i, q in enumerate(found)]


def run(n_questions: int = 300, repeats: int = 3, batch_size: int = 16, device: str = "auto") -> dict:
    from evaluation.adapters import VlmLikelihoodConfig
    from evaluation.adapters.likelihood import LikelihoodAdapter
    from evaluation.contract import protocol
    from evaluation.stage import passes
    from evaluation.templates import load_templates

    class JoinedRows(LikelihoodAdapter):
        shares_cache = False

    questions = eval_questions(n_questions)
    shown = passes(questions, protocol("single"))
    templates = load_templates()
    with tempfile.TemporaryDirectory() as tmp:
        texts = [q.text + " " + " ".join(q.options) for q in questions]
        config = VlmLikelihoodConfig(kind="likelihood", model=str(save_small_llava(Path(tmp) / "model", texts)),
                                     batch_size=batch_size, device=device)
        shared = LikelihoodAdapter("shared", config, templates)
        naive = LikelihoodAdapter("naive", config.model_copy(update={"share_prompt": False}), templates)
        joined = JoinedRows("joined", config, templates)

        def answer(adapter):
            return {p.subject: a for p, a in adapter.predict(shown)}

        for adapter in (shared, naive, joined):   # load, then warm up
            list(adapter.predict(shown[:batch_size]))
        naive_s, naive_answers = timed(lambda: answer(naive), repeats)
        shared_s, shared_answers = timed(lambda: answer(shared), repeats)
        joined_s, joined_answers = timed(lambda: answer(joined), repeats)
        device_name = str(shared.model.device)
    agree = sum(shared_answers[s].choice == a.choice for s, a in naive_answers.items())
    largest_gap = max(abs(x - y) for s, a in naive_answers.items() for x, y in zip(a.scores, shared_answers[s].scores))
    speedup = naive_s / shared_s
    return {"case": "eval_likelihood", "questions": n_questions, "options": 4 * n_questions, "repeats": repeats,
            "batch_size": batch_size, "device": device_name,
            "model": (f"random LLaVA: CLIP vision 2 layers width 64 at {IMAGE_SIZE} px ({(IMAGE_SIZE // PATCH) ** 2} "
                      "image tokens), LLaMA 4 layers width 128, byte-level BPE vocab 2000"),
            "naive_loop_s": round(naive_s, 3), "batched_shared_prompt_s": round(shared_s, 3),
            "batched_joined_s": round(joined_s, 3),
            "speedup": round(speedup, 2), "speedup_joined": round(naive_s / joined_s, 2),
            "identical_choices": agree == n_questions, "agreeing_choices": agree,
            "largest_score_gap": float(f"{largest_gap:.2e}"),
            "joined_equals_naive": all(joined_answers[s].choice == a.choice for s, a in naive_answers.items()),
            "target_speedup": 5.0, "meets_target": speedup >= 5.0 and agree == n_questions}


if __name__ == "__main__":
    # batch_size: questions per batch (x4 options)
    args = arguments(__doc__, {"questions": 60, "repeats": 1}, questions=300, repeats=3, batch_size=16,
                     device="auto").parse_args()
    save("eval_likelihood", run(args.questions, args.repeats, args.batch_size, args.device))
