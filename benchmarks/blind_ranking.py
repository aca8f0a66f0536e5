"""Batched likelihood ranking against the naive loop over each (question, option) pair.

Target (issue 5): on the same 500 questions with the same small model, the batched solver (questions
and options batched with padding, the question's key/value cache computed once and shared by its four
options) is >= 5x faster than scoring every (question, option) pair in its own forward pass, and makes
identical choices. The ratio is measured in one run, as the median of `repeats` timings of each.
Results: benchmarks/results/blind_ranking.json.

    .venv/bin/python benchmarks/blind_ranking.py            # 500 questions, 3 repeats
    .venv/bin/python benchmarks/blind_ranking.py --quick    # 100 questions, 1 repeat
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.blind_leaks import oracle_questions  # noqa: E402
from benchmarks.common import arguments, byte_level_tokenizer, save, timed  # noqa: E402


def save_small_llama(folder: Path, texts: list[str]) -> Path:
    """A small random LLaMA-style model (4 layers, width 256) with a byte-level BPE tokenizer
    trained on the questions, saved like any checkpoint."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = byte_level_tokenizer(texts, ["<s>", "</s>", "<unk>"], bos_token="<s>", eos_token="</s>",
                                     unk_token="<unk>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512,
                         bos_token_id=0, eos_token_id=1)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def naive_choices(solver, queries) -> list[int]:
    """One forward pass per (question, option): the loop batching replaces. Same prompt, same
    option tokens and the same mean normalisation as the solver."""
    import torch

    model, tokenizer = solver.model, solver.tokenizer
    choices = []
    with torch.inference_mode():
        for query in queries:
            prompt = tokenizer(solver.prompt_of(query))["input_ids"]
            scores = []
            for option in query.options:
                option_ids = tokenizer(" " + option.strip(), add_special_tokens=False)["input_ids"]
                ids = torch.tensor([prompt + option_ids], device=solver.device)
                logps = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
                picked = logps[len(prompt) - 1:].gather(-1, ids[0, len(prompt):, None]).squeeze(-1)
                scores.append(picked.mean().item())
            choices.append(max(range(len(scores)), key=scores.__getitem__))
    return choices


def run(n_questions: int = 500, repeats: int = 3, batch_size: int = 32, device: str = "auto") -> dict:
    from filters.solvers import LikelihoodConfig, Query
    from filters.solvers.likelihood import LikelihoodSolver

    questions = oracle_questions(max(20, n_questions // 4), seed=5)
    queries = [Query(q.text, tuple(q.options)) for q in questions][:n_questions]
    assert len(queries) == n_questions, f"only {len(queries)} oracle questions; ask for fewer"
    with tempfile.TemporaryDirectory() as tmp:
        texts = [q.text + " " + " ".join(q.options) for q in queries]
        path = save_small_llama(Path(tmp) / "model", texts)
        shared = LikelihoodSolver(LikelihoodConfig(kind="likelihood", model=str(path), batch_size=batch_size,
                                                   device=device))
        joined = LikelihoodSolver(shared.config.model_copy(update={"share_prompt": False}))
        shared.load()
        joined.load()
        shared.answer(queries[:8]), joined.answer(queries[:8]), naive_choices(shared, queries[:2])  # warm-up
        naive_s, naive = timed(lambda: naive_choices(shared, queries), repeats)
        shared_s, batched = timed(lambda: shared.answer(queries), repeats)
        joined_s, joined_predictions = timed(lambda: joined.answer(queries), repeats)
        device_name = str(shared.device)
    batched_choices = [p.choice for p in batched]
    agree = sum(a == b for a, b in zip(batched_choices, naive))
    speedup = naive_s / shared_s
    return {"case": "blind_ranking", "questions": n_questions, "options": 4 * n_questions, "repeats": repeats,
            "batch_size": batch_size, "device": device_name,
            "model": "random LLaMA-style, 4 layers, width 256, byte-level BPE vocab 2000",
            "naive_loop_s": round(naive_s, 3), "batched_shared_prompt_s": round(shared_s, 3),
            "batched_joined_s": round(joined_s, 3),
            "speedup": round(speedup, 2), "speedup_joined": round(naive_s / joined_s, 2),
            "identical_choices": agree == n_questions, "agreeing_choices": agree,
            "joined_equals_shared": [p.choice for p in joined_predictions] == batched_choices,
            "target_speedup": 5.0, "meets_target": speedup >= 5.0 and agree == n_questions}


if __name__ == "__main__":
    # batch_size: questions per batch (x4 option rows)
    args = arguments(__doc__, {"questions": 100, "repeats": 1}, questions=500, repeats=3, batch_size=32,
                     device="auto").parse_args()
    save("blind_ranking", run(args.questions, args.repeats, args.batch_size, args.device))
