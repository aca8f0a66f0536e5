"""Scoring multiple-choice options by their log-likelihood as a continuation, shared by the blind
filter's text-only likelihood solver and the vision-language likelihood adapter of the evaluation.

An option's tokens are always its own tokenization (" " + text, no special tokens) appended to the
prefix's ids, so every way of computing a score (one row per option, joined rows, a shared cache)
sees exactly the same tokens and can only differ by float rounding.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any


def option_ids(tokenizer, options: Sequence[str], *, continuation: bool = True) -> list[list[int]]:
    """Each option's token ids: as a continuation of a causal prefix (leading space, no special
    tokens), or as its own target sequence for a seq2seq decoder. An empty option becomes one pad
    token so that it still gets a score."""
    if continuation:
        rows = tokenizer([" " + o.strip() for o in options], add_special_tokens=False)["input_ids"]
    else:
        rows = tokenizer([o.strip() for o in options])["input_ids"]
    return [ids or [tokenizer.pad_token_id] for ids in rows]


def pad(rows: Sequence[Sequence[int]], pad_id: int, device, *, left: bool = False):
    """Rows of ids as one (ids, attention mask) pair of tensors, padded on the right or the left."""
    import torch

    width = max(map(len, rows))
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, row in enumerate(rows):
        span = slice(width - len(row), width) if left else slice(0, len(row))
        ids[r, span] = torch.tensor(list(row), dtype=torch.long)
        mask[r, span] = 1
    return ids.to(device), mask.to(device)


def reduce(token_logps, mask, normalise: str):
    """Per-row score: the sum of the option's token log-probabilities, or their mean."""
    total = (token_logps * mask).sum(-1)
    if normalise == "mean":
        total = total / mask.sum(-1).clamp(min=1)
    return total.float()


def options_in_rows(logits, ids, starts: Sequence[int], lengths: Sequence[int]):
    """Log-probabilities of the options inside full rows: row r's option is ids[r, start:start+length],
    each token predicted by the logits one position before it. Returns (rows, longest option) log-probs
    and the mask of real option tokens."""
    import torch

    logps = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    picked = torch.zeros((len(starts), max(lengths)), device=logps.device)
    mask = torch.zeros((len(starts), max(lengths)), dtype=torch.long, device=logps.device)
    for r, (start, length) in enumerate(zip(starts, lengths)):
        picked[r, :length] = logps[r, start - 1:start - 1 + length]
        mask[r, :length] = 1
    return picked, mask


def after_shared_prefix(model, prefix: Mapping[str, Any], options, option_mask, n: int):
    """Scores n options per prefix while running each prefix only once.

    `prefix` holds the model's inputs for the left-padded prefixes (input_ids, attention_mask and
    anything else the model needs, such as pixel values). Their key/value cache is repeated n times and
    the option rows (`options`, right-padded, prefix-major order) continue from each prefix's true end,
    thanks to explicit position ids. Returns the options' token log-probs, or None when the model's
    cache cannot be repeated (the caller then scores joined rows)."""
    import torch

    prefix_mask = prefix["attention_mask"]
    positions = (prefix_mask.cumsum(-1) - 1).clamp(min=0)
    out = model(**prefix, position_ids=positions, use_cache=True, **last_logits_only(model))
    cache = out.past_key_values
    if not hasattr(cache, "batch_repeat_interleave"):
        return None
    cache.batch_repeat_interleave(n)
    first = torch.log_softmax(out.logits[:, -1].float(), dim=-1).repeat_interleave(n, dim=0)
    lengths = prefix_mask.sum(-1).repeat_interleave(n)
    option_positions = lengths[:, None] + torch.arange(options.shape[1], device=options.device)[None]
    mask = torch.cat([prefix_mask.repeat_interleave(n, dim=0), option_mask], dim=1)
    logits = model(input_ids=options, attention_mask=mask, position_ids=option_positions,
                   past_key_values=cache).logits
    rest = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, options[:, 1:, None]).squeeze(-1)
    return torch.cat([first.gather(-1, options[:, :1]), rest], dim=1)


def last_logits_only(model) -> dict:
    """Asks for the last position's logits only, where the model allows it: a prefix of hundreds of
    image tokens times the vocabulary is most of the memory otherwise."""
    return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
