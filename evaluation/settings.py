"""The `evaluate` settings section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from evaluation.adapters import AnyAdapterConfig
from evaluation.conveval import ConvEvalSettings
from evaluation.protocols import ProtocolName, ProtocolSettings


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
