"""Prompt templates for evaluation, read from `evaluation/prompts.yaml` or the file `evaluate.prompts` names."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from benchsmith.settings import SettingsError, parse_yaml

DEFAULT = Path(__file__).with_name("prompts.yaml")


class JudgePrompt(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: int
    text: str


class Templates(BaseModel):
    model_config = ConfigDict(extra="forbid")

    choice: list[str] = Field(min_length=1)
    likelihood: list[str] = Field(min_length=1)
    matcher: str
    judge: list[JudgePrompt] = Field(min_length=1)


def load_templates(path: Path | str | None = None) -> Templates:
    source = Path(path) if path else DEFAULT
    try:
        data = parse_yaml(source.read_text(encoding="utf-8"))
        return Templates.model_validate(data)
    except OSError as exc:
        raise SettingsError(f"evaluate.prompts: cannot read {source}: {exc.strerror}") from None
    except (yaml.YAMLError, ValidationError) as exc:
        raise SettingsError(f"evaluate.prompts: {source} is not a valid prompt file: "
                            f"{str(exc).splitlines()[0]}") from None
