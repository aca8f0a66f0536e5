"""The `evaluate` settings section."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evaluation.adapters import AnyAdapterConfig
from evaluation.protocols import ProtocolName, ProtocolSettings

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


class EvalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    protocol: ProtocolName = "single"
    instability: ProtocolSettings = Field(default_factory=ProtocolSettings)
    prompts: str = ""                   # a prompt file like evaluation/prompts.yaml; "" for that one
    window: int = Field(64, ge=1)       # passes handed to a model at a time; answers are stored as they come
    bootstrap: int = Field(1000, ge=100)  # resamples behind each 95% interval on the board
    out_dir: str = "evaluations"        # under the workspace: boards and item analyses
    models: dict[str, AnyAdapterConfig] = Field(default_factory=dict)
    conversations: ConvEvalSettings = Field(default_factory=ConvEvalSettings)  # ConvEval (eval run --conversations)
