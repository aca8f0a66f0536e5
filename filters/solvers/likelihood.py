"""Likelihood solver: ranks the options by how likely a language model finds each one after the
question, the way SEED-Bench evaluated models, with any causal or seq2seq model from transformers.

Work is batched across questions and options, with padding. Questions are sorted by length first so
a batch pads little. The question is computed once per question, not once per option: a causal LM
runs the prompt once and its key/value cache is repeated for the four options; a seq2seq model runs
its encoder once and decodes the four options against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from benchsmith.models import from_pretrained, load_pretrained
from filters.solvers.base import BaseSolver, Prediction, Query
from filters.solvers.option_scoring import after_shared_prefix, option_ids, options_in_rows, pad, reduce

if TYPE_CHECKING:  # annotations only: the settings model builds this solver
    from filters.solvers import LikelihoodConfig


class LikelihoodSolver(BaseSolver):
    def __init__(self, config: LikelihoodConfig) -> None:
        super().__init__(config)
        self.model = None
        self.tokenizer = None

    # -- loading -----------------------------------------------------------------------------------
    def load(self) -> None:
        from transformers import AutoConfig

        where = {"owner": f"blind solver '{self.name}'", "setting": "the solver's `model`"}
        remote = self.config.trust_remote_code
        seq2seq = from_pretrained(AutoConfig, self.config.model, trust_remote_code=remote, **where).is_encoder_decoder
        self.tokenizer, self.model = load_pretrained(
            "AutoModelForSeq2SeqLM" if seq2seq else "AutoModelForCausalLM", self.config.model,
            device=self.config.device, dtype=self.config.dtype, processor_class="AutoTokenizer",
            trust_remote_code=remote, **where)
        if self.tokenizer.pad_token_id is None:  # GPT-2 style tokenizers have none; padding is masked anyway
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token

    def release(self) -> None:
        import torch

        self.model = self.tokenizer = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    @property
    def device(self):
        return self.model.device

    # -- answering ---------------------------------------------------------------------------------
    def answer(self, queries: Sequence[Query]) -> list[Prediction]:
        if not queries:
            return []
        if self.model is None:
            self.load()
        order = sorted(range(len(queries)), key=lambda i: len(queries[i].text) + sum(map(len, queries[i].options)))
        scores: list[list[float] | None] = [None] * len(queries)
        size = max(1, self.config.batch_size)
        for start in range(0, len(order), size):
            batch = [queries[i] for i in order[start:start + size]]
            for i, row in zip(order[start:start + size], self.score(batch)):
                scores[i] = row
        return list(map(self.predict, scores))

    def prompt_of(self, query: Query) -> str:
        return self.config.prompt.format(question=query.text)

    def score(self, batch: Sequence[Query]) -> list[list[float]]:
        """Each option's log-likelihood (summed or averaged over its tokens) given its question."""
        import torch

        with torch.inference_mode():
            if self.model.config.is_encoder_decoder:
                token_logps, mask = self._seq2seq(batch)
            elif self.config.share_prompt:
                token_logps, mask = self._causal_shared(batch)
            else:
                token_logps, mask = self._causal_joined(batch)
        n = len(batch[0].options)
        return reduce(token_logps, mask, self.config.normalise).view(len(batch), n).tolist()

    def _option_ids(self, batch: Sequence[Query]) -> list[list[int]]:
        return option_ids(self.tokenizer, [o for q in batch for o in q.options],
                          continuation=not self.model.config.is_encoder_decoder)

    def _pad(self, rows: list[list[int]], left: bool = False):
        return pad(rows, self.tokenizer.pad_token_id, self.device, left=left)

    def _seq2seq(self, batch: Sequence[Query]):
        import torch

        n = len(batch[0].options)
        enc = self.tokenizer([self.prompt_of(q) for q in batch], return_tensors="pt", padding=True).to(self.device)
        encoded = self.model.get_encoder()(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
        hidden = encoded.last_hidden_state.repeat_interleave(n, dim=0)
        labels, mask = self._pad(self._option_ids(batch))
        decoder_input_ids = self.model.prepare_decoder_input_ids_from_labels(
            labels=labels.masked_fill(mask == 0, -100))
        logits = self.model(encoder_outputs=(hidden,), attention_mask=enc["attention_mask"].repeat_interleave(n, 0),
                            decoder_input_ids=decoder_input_ids).logits
        logps = torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
        return logps, mask

    def _causal_shared(self, batch: Sequence[Query]):
        """Prompts left-padded and run once; their cache serves the options (option_scoring)."""
        prompt_ids, prompt_mask = self._pad(self.tokenizer([self.prompt_of(q) for q in batch])["input_ids"], left=True)
        options, option_mask = self._pad(self._option_ids(batch))
        logps = after_shared_prefix(self.model, {"input_ids": prompt_ids, "attention_mask": prompt_mask},
                                    options, option_mask, len(batch[0].options))
        return (logps, option_mask) if logps is not None else self._causal_joined(batch)

    def _causal_joined(self, batch: Sequence[Query]):
        """Each (prompt, option) pair as one right-padded row; for models whose cache cannot be shared."""
        n = len(batch[0].options)
        prompts = self.tokenizer([self.prompt_of(q) for q in batch])["input_ids"]
        options = self._option_ids(batch)
        ids, mask = self._pad([prompts[r // n] + option for r, option in enumerate(options)])
        logits = self.model(input_ids=ids, attention_mask=mask).logits
        return options_in_rows(logits, ids, [len(prompts[r // n]) for r in range(len(options))],
                               list(map(len, options)))
