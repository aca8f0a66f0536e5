"""Captions from any transformers image-to-text model: BLIP, BLIP-2, or other image-text-to-text models.

transformers 5 has no `image-to-text` pipeline, so the model goes through `AutoProcessor` and
`AutoModelForImageTextToText`. Several captioners can run side by side: configure one extractor per
model (SEED-Bench paired two that complement each other). Florence-2 has its own backend
(`extractors.florence`) because it is steered by task tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from PIL.Image import Image as Pixels
from pydantic import Field

from benchsmith.records import Fact
from benchsmith.settings import Settings
from extractors.base import Backend, BackendParams, Loaded, load_pretrained


class Captioner:
    """A loaded image-to-text model that writes one caption per image; also used for region crops."""

    def __init__(self, model: str, name: str, settings: Settings, *, device: str = "auto", prompt: str = "",
                 max_new_tokens: int = 40, num_beams: int = 3, field: str = "model") -> None:
        self.processor, self.model, self.device, self.dtype = load_pretrained(
            "AutoModelForImageTextToText", model, name, settings, device=device, field=field)
        self.prompt = prompt
        self.generate_options = {"max_new_tokens": max_new_tokens, "num_beams": num_beams}

    def __call__(self, pixels: Sequence[Pixels]) -> list[str]:
        import torch

        if not pixels:
            return []
        options = {"text": [self.prompt] * len(pixels)} if self.prompt else {}
        inputs = self.processor(images=list(pixels), return_tensors="pt", padding=True, **options)
        inputs = {k: v.to(self.device, self.dtype) if v.is_floating_point() else v.to(self.device)
                  for k, v in inputs.items()}
        with torch.inference_mode():
            generated = self.model.generate(**inputs, **self.generate_options)
        if self.prompt and not self.model.config.is_encoder_decoder and "input_ids" in inputs:
            generated = generated[:, inputs["input_ids"].shape[1]:]  # decoder-only models echo the prompt
        texts = self.processor.batch_decode(generated, skip_special_tokens=True)
        return [" ".join(text.split()) for text in texts]


class CaptionParams(BackendParams):
    model: str
    prompt: str = ""                 # e.g. "a photography of" for BLIP; empty: unconditional caption
    max_new_tokens: int = Field(40, ge=1)
    num_beams: int = Field(3, ge=1)


class CaptionExtractor(Backend):
    Params = CaptionParams
    uses_gpu = True

    def load(self) -> None:
        p = self.params
        self.captioner = Captioner(p.model, self.name, self.settings, device=p.device, prompt=p.prompt,
                                   max_new_tokens=p.max_new_tokens, num_beams=p.num_beams)

    def extract(self, images: Sequence[Loaded]) -> list[list[Fact]]:
        texts = self.captioner([loaded.pixels for loaded in images])
        return [[self.fact(loaded.image, "caption", text)] if text else [] for loaded, text in zip(images, texts)]
