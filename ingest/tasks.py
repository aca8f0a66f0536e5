"""Task kinds (data/reform_tasks.yaml): how a row of an annotated dataset is read as an annotation for the
reform generator. Ingest checks a source's kind against them and keeps each row under the image's
`annotations.reform`; the generator reads them back from there."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from benchsmith.dimensions import registry
from benchsmith.paths import DATA_DIR
from benchsmith.records import Image
from benchsmith.settings import parse_yaml

TASKS_FILE = DATA_DIR / "reform_tasks.yaml"
Method = Literal["answers", "classes", "captions", "regions", "texts"]


class TaskKind(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    method: Method
    dimension: str
    question: str = ""
    fields: dict[str, tuple[str, ...]]


@lru_cache(maxsize=4)
def load_tasks(path: Path | None = None) -> dict[str, TaskKind]:
    data = parse_yaml((path or TASKS_FILE).read_text(encoding="utf-8"))
    kinds = {key: TaskKind(key=key, **spec) for key, spec in data["tasks"].items()}
    for kind in kinds.values():
        registry().get(kind.dimension)  # an unknown dimension fails here, naming it
    return kinds


def records_of(item: Image) -> list[dict]:
    """The item's reform annotations as ingest kept them: {task, dataset, row, fields}."""
    return list(item.annotations.get("reform") or [])
