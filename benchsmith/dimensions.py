"""The dimension registry, read from data/dimensions.yaml."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from benchsmith.paths import DATA_DIR
from benchsmith.settings import parse_yaml


class Dimension(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int
    key: str
    name: str
    modality: Literal["image", "video", "image_set"]
    definition: str
    group: str = ""  # a family of dimensions: charts, maps or web (text-rich), multi_image


class Registry:
    def __init__(self, dimensions: list[Dimension]) -> None:
        self._by_id = {d.id: d for d in dimensions}
        self._by_key = {d.key: d for d in dimensions}
        if len(self._by_id) != len(dimensions) or len(self._by_key) != len(dimensions):
            raise ValueError("dimension ids and keys must be unique")

    def __iter__(self):
        return iter(sorted(self._by_id.values(), key=lambda d: d.id))

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, ref: int | str) -> Dimension:
        """A dimension by id (1) or key ('scene_understanding')."""
        found = self._by_id.get(ref) if isinstance(ref, int) else self._by_key.get(ref)
        if found is None and isinstance(ref, str) and ref.isdigit():
            found = self._by_id.get(int(ref))
        if found is None:
            raise KeyError(f"unknown dimension {ref!r}; known: {', '.join(map(str, sorted(self._by_id)))}")
        return found

    def for_modality(self, modality: str) -> list[Dimension]:
        return [d for d in self if d.modality == modality]


def load_registry(path: Path | None = None) -> Registry:
    data = parse_yaml((path or DATA_DIR / "dimensions.yaml").read_text(encoding="utf-8"))
    return Registry([Dimension(**entry) for entry in data["dimensions"]])


@lru_cache(maxsize=1)
def registry() -> Registry:
    return load_registry()
