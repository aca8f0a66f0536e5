"""The `evaluate` settings section."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from benchsmith import plugins
from benchsmith.settings import WithParts
from evaluation.adapters import AnyAdapterConfig

Setting = Literal["model", "perception_given", "perception_reasoning_given"]  # ConvEval: which turns are given


class ConvEvalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    judge_model: str = "gpt-4o"
    reference_model: str = ""            # pairwise opponent, a name under evaluate.models; "": the references
    settings: list[Setting] = ["model", "perception_given", "perception_reasoning_given"]
    answer_max_tokens: int = Field(1024, ge=16)
    judge_max_tokens: int = Field(800, ge=16)
    prompts: str = ""                    # a file shaped like evaluation/conveval.yaml; "" for that one
    llm: dict[str, Any] = Field(default_factory=dict)   # the judge's LlmOptions: concurrency, limits, retries


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
    conversations: ConvEvalSettings = Field(default_factory=ConvEvalSettings)  # ConvEval (eval run --conversations)

    @field_validator("protocol")
    @classmethod
    def _installed_protocol(cls, name: str) -> str:
        if name not in plugins.names("protocols"):
            raise ValueError(f"{name}: not an installed protocol (installed: {', '.join(plugins.names('protocols'))})")
        return name
