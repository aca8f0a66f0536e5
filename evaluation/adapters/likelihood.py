"""White-box evaluation, SEED-Bench's way: a vision-language model ranks the options of a question by
the log-likelihood of each option's text after the image(s) and the prompt, so the model never has to
follow an answer format.

The model is loaded and prompted as in transformers_vlm.py (the `generate` adapter's code too). An
option's score is the sum (or the mean) of its tokens' log-probabilities; its tokens are appended to
the prefix's ids (filters/solvers/option_scoring.py), the same tokens on every path below.

- `share_prompt: true`: `batch_size` questions at a time; their image+prompt prefixes run once, and the
  cache is repeated for the options. Models whose cache cannot be repeated, or whose positions are not
  plain token counts (Qwen2-VL's multimodal rotary positions), score joined rows instead: every
  (prefix, option) pair as one right-padded row, still batched.
- `share_prompt: false`: the reference loop, one forward pass per (question, option) with the whole
  image+prompt+option and nothing padded or shared.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from evaluation.adapters.transformers_vlm import TransformersVlm
from evaluation.records import ModelAnswer, Pass
from filters.solvers import choose
from filters.solvers.option_scoring import after_shared_prefix, option_ids, options_in_rows, pad, reduce

if TYPE_CHECKING:  # annotations only: the settings model builds this adapter
    from evaluation.adapters import VlmLikelihoodConfig


class LikelihoodAdapter(TransformersVlm):
    config: VlmLikelihoodConfig
    wording = "likelihood"

    @property
    def shares_cache(self) -> bool:
        """Whether the model can continue a shared prefix cache: models that compute multimodal rotary
        positions themselves (Qwen2-VL style, `get_rope_index`) would not take the plain positions it needs."""
        return not hasattr(getattr(self.model, "model", self.model), "get_rope_index")

    def answer(self, batch: Sequence[Pass]) -> Iterator[tuple[Pass, ModelAnswer]]:
        for p, scores in zip(batch, self.score(batch)):
            yield p, ModelAnswer(choice=choose(scores), scores=tuple(scores), matched_by="likelihood")

    def score(self, batch: Sequence[Pass]) -> list[list[float]]:
        """Each shown option's log-likelihood after its pass's images and prompt."""
        import torch

        with torch.inference_mode():
            if not self.config.share_prompt:
                return [self.score_one_by_one(p) for p in batch]
            logps, mask = (self.shared(batch) if self.shares_cache else None) or self.joined(batch)
        n = len(batch[0].options)
        return reduce(logps, mask, self.config.normalise).view(len(batch), n).tolist()

    def score_one_by_one(self, p: Pass) -> list[float]:
        """The reference: one unpadded forward pass per option over the images, prompt and option."""
        text, images = self.inputs(p)
        encoded = self.processor(text=[text], images=[images], return_tensors="pt")
        scores = []
        for ids in option_ids(self.processor.tokenizer, p.options):
            row, [start] = self.with_options(encoded, [ids])
            logits = self.model(**self.on_model(row)).logits
            logps, mask = options_in_rows(logits, row["input_ids"].to(logits.device), [start], [len(ids)])
            scores.append(float(reduce(logps, mask, self.config.normalise)[0]))
        return scores

    def shared(self, batch: Sequence[Pass]):
        """The batch's prefixes, left-padded, run once; (token log-probs, mask) of every option, or
        None when the model's cache cannot be repeated."""
        texts, images = zip(*map(self.inputs, batch))
        prefix = self.processor(text=list(texts), images=list(images), padding=True, padding_side="left",
                                return_tensors="pt")
        tokenizer = self.processor.tokenizer
        options, option_mask = pad(option_ids(tokenizer, [o for p in batch for o in p.options]),
                                   tokenizer.pad_token_id, self.model.device)
        logps = after_shared_prefix(self.model, self.on_model(prefix), options, option_mask, len(batch[0].options))
        return None if logps is None else (logps, option_mask)

    def joined(self, batch: Sequence[Pass]):
        """Every (prefix, option) pair as one right-padded row with its own copy of the images."""
        n = len(batch[0].options)
        texts, images = zip(*map(self.inputs, batch))
        encoded = self.processor(text=[t for t in texts for _ in range(n)],
                                 images=[i for i in images for _ in range(n)],
                                 padding=True, padding_side="right", return_tensors="pt")
        options = option_ids(self.processor.tokenizer, [o for p in batch for o in p.options])
        rows, starts = self.with_options(encoded, options)
        logits = self.model(**self.on_model(rows)).logits
        return options_in_rows(logits, rows["input_ids"].to(logits.device), starts, list(map(len, options)))

    def with_options(self, encoded: Mapping, options: Sequence[Sequence[int]]) -> tuple[dict, list[int]]:
        """The processor's right-padded prefixes with row r's option ids appended after its last real
        token, and where each option starts. Other per-token inputs (Qwen2-VL's token types) are
        zero over the option, as text tokens are."""
        ids = encoded["input_ids"]
        starts = encoded["attention_mask"].sum(-1).tolist()
        rows, mask = pad([ids[r, :start].tolist() + list(option) for r, (start, option)
                          in enumerate(zip(starts, options))], self.processor.tokenizer.pad_token_id, "cpu")
        joined = dict(encoded, input_ids=rows, attention_mask=mask)
        for key, value in encoded.items():
            if key not in ("input_ids", "attention_mask") and getattr(value, "shape", None) == ids.shape:
                grown = value.new_zeros(rows.shape)
                grown[:, :ids.shape[1]] = value
                joined[key] = grown
        return joined, starts
