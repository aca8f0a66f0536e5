"""Likelihood solver: ranks the options by how likely a language model finds each one after the
question, the way SEED-Bench evaluated models, with any causal or seq2seq model from transformers.

Work is batched across questions and options, with padding. Questions are sorted by length first so
a batch pads little. The question is computed once per question, not once per option: a causal LM
runs the prompt once and its key/value cache is repeated for the four options; a seq2seq model runs
its encoder once and decodes the four options against it.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchsmith.errors import BenchsmithError
from filters.solvers import LikelihoodConfig, Prediction, Query, choose, pick_device, pick_dtype


class LikelihoodSolver:
    def __init__(self, config: LikelihoodConfig) -> None:
        self.config = config
        self.name = config.label
        self.model = None
        self.tokenizer = None

    # -- loading -----------------------------------------------------------------------------------
    def load(self) -> None:
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

        device = pick_device(self.config.device)
        dtype = pick_dtype(self.config.dtype, device)
        remote = self.config.trust_remote_code
        try:
            model_config = AutoConfig.from_pretrained(self.config.model, trust_remote_code=remote)
            self.tokenizer = AutoTokenizer.from_pretrained(self.config.model, trust_remote_code=remote)
            loader = AutoModelForSeq2SeqLM if model_config.is_encoder_decoder else AutoModelForCausalLM
            self.model = loader.from_pretrained(self.config.model, dtype=dtype, trust_remote_code=remote)
        except (OSError, ValueError) as exc:
            raise BenchsmithError(f"cannot load blind solver model {self.config.model!r}: {exc}") from None
        self.model.to(device).eval()
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
        return [Prediction(choose(s, self.config.tie_margin), tuple(s)) for s in scores]

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
        total = (token_logps * mask).sum(-1)
        if self.config.normalise == "mean":
            total = total / mask.sum(-1).clamp(min=1)
        n = len(batch[0].options)
        return total.float().view(len(batch), n).tolist()

    def _option_ids(self, batch: Sequence[Query], **kwargs) -> list[list[int]]:
        texts = [" " + o.strip() if not self.model.config.is_encoder_decoder else o.strip()
                 for q in batch for o in q.options]
        return [ids or [self.tokenizer.pad_token_id] for ids in self.tokenizer(texts, **kwargs)["input_ids"]]

    def _pad(self, rows: list[list[int]], left: bool = False):
        import torch

        width = max(map(len, rows))
        ids = torch.full((len(rows), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            span = slice(width - len(row), width) if left else slice(0, len(row))
            ids[r, span] = torch.tensor(row, dtype=torch.long)
            mask[r, span] = 1
        return ids.to(self.device), mask.to(self.device)

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
        """Prompts left-padded and run once; their cache is repeated for each option, which continues
        from the prompt's true end thanks to explicit position ids."""
        import torch

        n = len(batch[0].options)
        prompt_ids, prompt_mask = self._pad(self.tokenizer([self.prompt_of(q) for q in batch])["input_ids"], left=True)
        positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions, use_cache=True)
        cache = out.past_key_values
        if not hasattr(cache, "batch_repeat_interleave"):
            return self._causal_joined(batch)
        cache.batch_repeat_interleave(n)
        first = torch.log_softmax(out.logits[:, -1].float(), dim=-1).repeat_interleave(n, dim=0)
        option_ids, option_mask = self._pad(self._option_ids(batch, add_special_tokens=False))
        lengths = prompt_mask.sum(-1).repeat_interleave(n)
        option_positions = lengths[:, None] + torch.arange(option_ids.shape[1], device=self.device)[None]
        logits = self.model(input_ids=option_ids, position_ids=option_positions, past_key_values=cache,
                            attention_mask=torch.cat([prompt_mask.repeat_interleave(n, 0), option_mask], dim=1)).logits
        rest = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        logps = torch.cat([first.gather(-1, option_ids[:, :1]),
                           rest.gather(-1, option_ids[:, 1:].unsqueeze(-1)).squeeze(-1)], dim=1)
        return logps, option_mask

    def _causal_joined(self, batch: Sequence[Query]):
        """Each (prompt, option) pair as one right-padded row; for models whose cache cannot be shared."""
        import torch

        n = len(batch[0].options)
        prompts = self.tokenizer([self.prompt_of(q) for q in batch])["input_ids"]
        options = self._option_ids(batch, add_special_tokens=False)
        rows = [prompts[i // n] + option for i, option in enumerate(options)]
        ids, mask = self._pad(rows)
        logits = self.model(input_ids=ids, attention_mask=mask).logits
        logps = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        width = max(map(len, options))
        picked = torch.zeros((len(rows), width), device=self.device)
        option_mask = torch.zeros((len(rows), width), dtype=torch.long, device=self.device)
        for r, option in enumerate(options):
            start = len(prompts[r // n]) - 1  # logits at position t predict token t + 1
            picked[r, :len(option)] = logps[r, start:start + len(option)]
            option_mask[r, :len(option)] = 1
        return picked, option_mask
