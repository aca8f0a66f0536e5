"""Prompt templates for evaluation, read from `evaluation/prompts.yaml` or the file `evaluate.prompts` names."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError

from benchsmith.settings import SettingsError, Strict, parse_yaml

DEFAULT = Path(__file__).with_name("prompts.yaml")
M = TypeVar("M", bound=BaseModel)


class JudgePrompt(Strict):
    rule: int
    text: str


class Templates(Strict):
    choice: list[str] = Field(min_length=1)
    likelihood: list[str] = Field(min_length=1)
    matcher: str
    judge: list[JudgePrompt] = Field(min_length=1)


def load_prompt_file(model: type[M], path: Path | str | None, default: Path, key: str) -> M:
    """The prompt file at `path` (None or "": `default`) validated by `model`; `key` names the setting
    that points at it, for the one-line error a bad file gets."""
    source = Path(path) if path else default
    try:
        return model.model_validate(parse_yaml(source.read_text(encoding="utf-8")))
    except OSError as exc:
        raise SettingsError(f"{key}: cannot read {source}: {exc.strerror}") from None
    except (yaml.YAMLError, ValidationError) as exc:
        raise SettingsError(f"{key}: {source} is not a valid prompt file: {str(exc).splitlines()[0]}") from None


def load_templates(path: Path | str | None = None) -> Templates:
    return load_prompt_file(Templates, path, DEFAULT, "evaluate.prompts")
