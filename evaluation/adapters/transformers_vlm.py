"""A transformers vision-language model as the evaluation adapters run it, white-box (`likelihood`)
or black-box (`generate`): loading through AutoModelForImageTextToText + AutoProcessor, the prompt
through the processor's chat template, the images of a pass, what the model cannot take, batching.

Any model of those auto classes (LLaVA, Qwen2-VL, Idefics style). The prompt goes through the chat
template when the processor has one (a user turn with the images and the prompt, then the assistant's
turn opened), else the model's image token starts it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import groupby
from typing import TYPE_CHECKING

from benchsmith.models import load_pretrained
from evaluation.adapters.base import EvalError
from evaluation.records import ModelAnswer, Pass
from evaluation.templates import Templates

if TYPE_CHECKING:  # annotations only: the settings model builds this adapter
    from evaluation.adapters import TransformersVlmConfig


class TransformersVlm:
    wording = "choice"                   # the prompt file's templates it answers under: `choice` or `likelihood`

    def __init__(self, name: str, config: TransformersVlmConfig, templates: Templates) -> None:
        self.name = name
        self.config = config
        self.wordings = getattr(templates, self.wording)   # one per template number of a pass
        self.model = None
        self.processor = None

    def load(self) -> None:
        owner = f"evaluation model '{self.name}'"
        self.processor, self.model = load_pretrained(
            "AutoModelForImageTextToText", self.config.model, owner=owner, setting=f"evaluate.models.{self.name}.model",
            device=self.config.device, dtype=self.config.dtype, trust_remote_code=self.config.trust_remote_code)
        if getattr(self.processor, "image_processor", None) is None:
            raise EvalError(f"{owner} cannot load model {self.config.model}: its processor takes no images")
        tokenizer = self.processor.tokenizer
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token

    def release(self) -> None:
        import torch

        self.model = self.processor = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def prefix(self, p: Pass, n_images: int) -> str:
        """The text the model continues: the prompt, with one image placeholder per image."""
        prompt = self.wordings[p.template].format(question=p.question.text, options=p.options_block())
        if getattr(self.processor, "chat_template", None):
            content = [{"type": "image"} for _ in range(n_images)] + [{"type": "text", "text": prompt}]
            return self.processor.apply_chat_template([{"role": "user", "content": content}],
                                                      add_generation_prompt=True, tokenize=False)
        token = getattr(self.processor, "image_token", None) or "<image>"
        return token * n_images + "\n" + prompt

    def inputs(self, p: Pass) -> tuple[str, list]:
        """The pass's prefix text and the images it names."""
        images = p.question.images(self.config.max_frames)
        return self.prefix(p, len(images)), images

    def cannot_take(self, p: Pass) -> str:
        """Why the model cannot answer this pass; "" when it can."""
        frames = p.question.n_frames
        if not frames:
            return "the question has no image"
        if frames > 1 and not self.config.video:
            return (f"a question with {frames} images ({p.question.data_type}) and model {self.config.model!r} "
                    "takes one image (evaluate.models: video false)")
        if frames > 1:
            text, images = self.inputs(p)
            try:
                self.processor(text=[text], images=[images], return_tensors="pt")
            except (ValueError, TypeError, IndexError, RuntimeError) as exc:
                return f"model {self.config.model!r} cannot take {len(images)} images: {str(exc).strip()[:200]}"
        return ""

    def predict(self, passes: Sequence[Pass]) -> Iterator[tuple[Pass, ModelAnswer | str]]:
        """Loads the model, answers each pass it cannot take as skipped (with the reason), then the others a
        batch at a time (`answer`: the subclass's answer, or its reply in words for its `predict` to match)."""
        if self.model is None:
            self.load()
        ready = []
        for p in passes:
            reason = self.cannot_take(p)
            if reason:
                yield p, ModelAnswer(skipped=reason)
            else:
                ready.append(p)
        for batch in self.batches(ready):
            yield from self.answer(batch)

    def answer(self, batch: Sequence[Pass]) -> Iterator[tuple[Pass, ModelAnswer | str]]:
        raise NotImplementedError

    def batches(self, passes: Sequence[Pass]) -> Iterator[list[Pass]]:
        """Up to `batch_size` passes with the same number of options, similar ones together so that
        a batch pads little."""
        def size(p: Pass) -> tuple[int, int, int]:
            images = p.question.n_shown(self.config.max_frames)
            return len(p.options), images, len(p.question.text) + sum(map(len, p.options))

        for _, group in groupby(sorted(passes, key=size), key=lambda p: len(p.options)):
            group = list(group)
            for start in range(0, len(group), self.config.batch_size):
                yield group[start:start + self.config.batch_size]

    def on_model(self, inputs: Mapping) -> dict:
        """Inputs on the model's device; floating ones (pixel values) in the model's dtype."""
        return {key: value.to(self.model.device, dtype=self.model.dtype) if value.is_floating_point()
                else value.to(self.model.device) for key, value in inputs.items() if hasattr(value, "to")}
