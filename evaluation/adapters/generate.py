"""Black-box evaluation with a local transformers vision-language model: the model answers each pass
in words with greedy `generate` (at most `max_new_tokens` new tokens), prompted with the same choice
templates as a chat endpoint, and the reply is matched to an option by `evaluation.matching`. A reply
that matches nothing goes to the LLM matcher when `matcher_model` is set (as for the `openai` kind);
otherwise, or when the matcher says none, it is stored as it came (a format miss,
counted in the board's format-hit rate).

Loading, prompting, images and batching are transformers_vlm.py's, as for the likelihood adapter.
Passes of a batch are left-padded so that every reply starts right after its own prompt.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from benchsmith.llm import LlmClient, LlmOptions
from evaluation.matching import LlmMatcher
from evaluation.adapters.transformers_vlm import TransformersVlm
from evaluation.records import ModelAnswer, Pass
from evaluation.templates import Templates

if TYPE_CHECKING:  # annotations only: the settings model builds this adapter
    from evaluation.adapters import VlmGenerateConfig


class GenerateAdapter(TransformersVlm):
    config: VlmGenerateConfig

    def __init__(self, name: str, config: VlmGenerateConfig, templates: Templates, *, settings=None,
                 store=None) -> None:
        super().__init__(name, config, templates)
        client = config.matcher_model and LlmClient(settings, LlmOptions.model_validate(config.llm), store=store)
        self.matcher = LlmMatcher(client or None, config.matcher_model, templates.matcher)

    def predict(self, passes: Sequence[Pass]) -> Iterator[tuple[Pass, ModelAnswer]]:
        return self.matcher.matched(super().predict(passes))

    def answer(self, batch: Sequence[Pass]) -> Iterator[tuple[Pass, str]]:
        """Each pass's greedy reply, decoded without special tokens (`predict` matches it to an option)."""
        import torch

        texts, images = zip(*map(self.inputs, batch))
        encoded = self.processor(text=list(texts), images=list(images), padding=True, padding_side="left",
                                 return_tensors="pt")
        tokenizer = self.processor.tokenizer
        with torch.inference_mode():
            out = self.model.generate(**self.on_model(encoded), do_sample=False, num_beams=1,
                                      max_new_tokens=self.config.max_new_tokens, pad_token_id=tokenizer.pad_token_id)
        new = out[:, encoded["input_ids"].shape[1]:]
        return zip(batch, [reply.strip() for reply in tokenizer.batch_decode(new, skip_special_tokens=True)])
