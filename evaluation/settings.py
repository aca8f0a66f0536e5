"""The `evaluate` settings section."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from benchsmith import plugins
from benchsmith.settings import WithParts
from evaluation.adapters import AnyAdapterConfig, EvalError


class EvalSettings(WithParts):
    """The `evaluate` section: the keys below, and one key per protocol that has settings
    (`evaluate.<protocol>`), validated by that protocol's settings model."""

    parts: ClassVar[str] = "protocols"

    protocol: str = "single"            # an installed protocol (plugin group protocols)
    prompts: str = ""                   # a prompt file like evaluation/prompts.yaml; "" for that one
    window: int = Field(64, ge=1)       # passes handed to a model at a time; answers are stored as they come
    bootstrap: int = Field(1000, ge=100)  # resamples behind each 95% interval on the board
    out_dir: str = "evaluations"        # under the workspace: boards and item analyses
    models: dict[str, AnyAdapterConfig] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data):
        if isinstance(data, dict) and "conversations" in data:
            raise ValueError("the key `conversations` is now `conveval`: ConvEval is the protocol conveval "
                             "(`eval run --protocol conveval`), configured under its name")
        return data

    @field_validator("protocol")
    @classmethod
    def _installed_protocol(cls, name: str) -> str:
        if name not in plugins.names("protocols"):
            raise ValueError(f"{name}: not an installed protocol (installed: {', '.join(plugins.names('protocols'))})")
        return name

    def model(self, name: str) -> AnyAdapterConfig:
        """The model configured as `name` under evaluate.models."""
        if name not in self.models:
            known = ", ".join(sorted(self.models)) or "none"
            raise EvalError(f"no model {name!r} under evaluate.models in the settings (configured: {known})")
        return self.models[name]
