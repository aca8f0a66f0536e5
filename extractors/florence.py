"""Florence-2: captions, labelled boxes and dense region captions from one model, steered by task tokens.

- `<CAPTION>`, `<DETAILED_CAPTION>`, `<MORE_DETAILED_CAPTION>` -> caption facts;
- `<OD>` -> object facts (label and box), an alternative to SAM + CLIP labels;
- `<DENSE_REGION_CAPTION>` -> region facts (a phrase per box), the role GRiT played in SEED-Bench;
- `<OCR_WITH_REGION>` -> ocr facts.
The model is loaded once and runs every configured task over each batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from benchsmith.records import Fact, Image
from benchsmith.geometry import unit_box
from extractors.base import Backend, BackendParams, Loaded, load_pretrained

Task = Literal["<CAPTION>", "<DETAILED_CAPTION>", "<MORE_DETAILED_CAPTION>", "<OD>", "<DENSE_REGION_CAPTION>",
               "<OCR_WITH_REGION>"]
CAPTION_TASKS = ("<CAPTION>", "<DETAILED_CAPTION>", "<MORE_DETAILED_CAPTION>")


class Florence2Params(BackendParams):
    model: str
    tasks: list[Task] = Field(default_factory=lambda: ["<DETAILED_CAPTION>"], min_length=1)
    max_new_tokens: int = Field(256, ge=1)
    num_beams: int = Field(3, ge=1)


class Florence2Extractor(Backend):
    Params = Florence2Params
    uses_gpu = True

    def load(self) -> None:
        self.processor, self.model, self.device, self.dtype = load_pretrained(
            "AutoModelForImageTextToText", self.params.model, self.name, self.settings, device=self.params.device)

    def _answers(self, task: str, images: Sequence[Loaded]) -> list[Any]:
        import torch

        pixels = [loaded.pixels for loaded in images]
        inputs = self.processor(text=[task] * len(pixels), images=pixels, return_tensors="pt")
        inputs = {k: v.to(self.device, self.dtype) if v.is_floating_point() else v.to(self.device)
                  for k, v in inputs.items()}
        with torch.inference_mode():
            generated = self.model.generate(**inputs, max_new_tokens=self.params.max_new_tokens,
                                            num_beams=self.params.num_beams)
        texts = self.processor.batch_decode(generated, skip_special_tokens=False)
        return [self.processor.post_process_generation(text, task=task, image_size=p.size)[task]
                for text, p in zip(texts, pixels)]

    def extract(self, images: Sequence[Loaded]) -> list[list[Fact]]:
        out: list[list[Fact]] = [[] for _ in images]
        for task in self.params.tasks:
            for index, (loaded, answer) in enumerate(zip(images, self._answers(task, images))):
                out[index].extend(self.facts_from_answer(loaded.image, task, answer, *loaded.pixels.size))
        return out

    def facts_from_answer(self, image: Image, task: str, answer: Any, width: int, height: int) -> list[Fact]:
        """Facts from one parsed Florence-2 answer (pixel coordinates) for an image of width x height."""
        if task in CAPTION_TASKS:
            text = " ".join(str(answer).split())
            return [self.fact(image, "caption", text)] if text else []
        if task == "<OCR_WITH_REGION>":
            texts = [" ".join(text.replace("</s>", "").replace("<s>", "").split()) for text in answer["labels"]]
            return [self.fact(image, "ocr", text, quad=tuple((min(max(quad[i] / width, 0.0), 1.0),
                                                              min(max(quad[i + 1] / height, 0.0), 1.0))
                                                             for i in range(0, 8, 2)))
                    for quad, text in zip(answer["quad_boxes"], texts) if text]
        kind = "object" if task == "<OD>" else "region"
        return [self.fact(image, kind, " ".join(label.split()),
                          box=unit_box(width, height, box_px=box, model_output=True, ndigits=5))
                for box, label in zip(answer["bboxes"], answer["labels"]) if label.strip()]
