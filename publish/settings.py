"""The `publish` settings section."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from benchsmith.settings import Strict


class PublishSettings(Strict):
    name: str = "benchsmith-bench"
    pretty_name: str = "benchsmith benchmark"
    description: str = "A multimodal multiple-choice benchmark in the SEED-Bench format, built with benchsmith."
    license: str = "cc-by-4.0"
    language: list[str] = Field(default_factory=lambda: ["en"])
    task_categories: list[str] = Field(default_factory=lambda: ["visual-question-answering", "multiple-choice"])
    tags: list[str] = Field(default_factory=lambda: ["benchmark", "multimodal", "seed-bench"])
    split: str = "test"
    releases_dir: str = "releases"
    shard_rows: int = Field(500, ge=1)
    image_format: Literal["png", "jpeg"] = "png"
    jpeg_quality: int = Field(95, ge=1, le=100)
    private: bool = False
    version: str = ""
    push: str = ""


def releases_root(settings) -> Path:
    """The folder that holds one folder per published version."""
    return settings.workspace / settings.section("publish", PublishSettings).releases_dir
