"""Annotations supplied with the images (manifest rows, COCO-style datasets) turned into facts.

Ingest has already checked them and put every box in unit coordinates (`Image.annotations`); this
backend only restates them as facts, so later stages read supplied and extracted facts the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from benchsmith.records import Fact
from extractors.base import Backend, BackendParams, Loaded

SuppliedKind = Literal["captions", "tags", "objects", "ocr"]


class SuppliedParams(BackendParams):
    kinds: list[SuppliedKind] = ["captions", "tags", "objects", "ocr"]  # which supplied annotations become facts


class SuppliedExtractor(Backend):
    Params = SuppliedParams
    needs_pixels = False

    def extract(self, images: Sequence[Loaded]) -> list[list[Fact]]:
        return [self._facts(loaded) for loaded in images]

    def _facts(self, loaded: Loaded) -> list[Fact]:
        image, notes, kinds = loaded.image, loaded.image.annotations, set(self.params.kinds)
        out = []
        if "captions" in kinds:
            out += [self.fact(image, "caption", text) for text in notes.get("captions", []) if text.strip()]
        if "tags" in kinds:
            out += [self.fact(image, "tag", text) for text in notes.get("tags", []) if text.strip()]
        if "objects" in kinds:
            # a crowd region (COCO iscrowd) stays an object fact, marked so that nothing counts it as one thing
            out += [self.fact(image, "object", o["label"], box=tuple(o["box"]), score=o.get("score"),
                              attributes={k: str(v) for k, v in (o.get("attributes") or {}).items()}
                              | ({"crowd": "true"} if o.get("crowd") else {}))
                    for o in notes.get("objects", [])]
        if "ocr" in kinds:
            out += [self.fact(image, "ocr", line["text"], quad=tuple(tuple(p) for p in line["quad"]),
                              score=line.get("score"))
                    for line in notes.get("ocr", []) if line["text"].strip()]
        return out
