"""Model adapters: one narrow protocol, `Adapter.predict(passes) -> (pass, answer) pairs`, chosen by
`kind` under `evaluate.models.<name>` in the settings: each kind is a settings model registered in the
`adapters` group of the plugin registry (benchsmith/plugins.py), and that model builds its adapter.

- `likelihood` (white-box, SEED-Bench's way): a transformers vision-language model ranks the options by
  the log-likelihood of each option's text after the image and the question;
- `openai` (black-box, ReForm-Eval / MMBench's way): a chat model with image input answers in words,
  and the answer is matched to an option;
- `generate` (black-box too): a transformers vision-language model answers with greedy `generate`,
  loaded and prompted as `likelihood` loads it, and the reply is matched to an option the same way;
- `blind`: a text-only solver from the blind filter, for the baselines beside the models.

An adapter yields each pass's answer as it becomes ready, in any order. A model that cannot be loaded
or an endpoint that cannot be used raises `EvalError` (the run stops with one line; finished
predictions are kept); a pass it cannot take is answered with `ModelAnswer(skipped=reason)`. An adapter
that can hold a conversation (the `openai` one, which the conveval protocol asks for) also has
`turn_request` and `converse`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field

from benchsmith import plugins
from benchsmith.settings import UNKEYED, Strict, keyed
from evaluation.adapters.base import Adapter, EvalError  # noqa: F401 - the package's API


class AdapterConfig(Strict):
    def identity(self) -> dict[str, Any]:
        """What changes the model's answers: every field but the `UNKEYED` ones (batching, cache sharing,
        client options and devices)."""
        return keyed(self)

    def build(self, name: str, *, templates, settings, store=None) -> Adapter:
        """The adapter these settings describe; its model loads lazily, on the first `predict`."""
        raise NotImplementedError


class TransformersVlmConfig(AdapterConfig):
    """A transformers image-text-to-text model (LLaVA, Qwen2-VL, Idefics style), loaded locally."""

    model: str                                   # Hugging Face id or local folder
    batch_size: int = Field(8, ge=1, json_schema_extra=UNKEYED)  # questions per pass (likelihood: times the options)
    max_frames: int = Field(8, ge=1)             # frames of a video question given to the model
    video: bool = True                           # false: the model takes one image; videos and image sets are skipped
    device: str = Field("auto", json_schema_extra=UNKEYED)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    trust_remote_code: bool = False


class VlmLikelihoodConfig(TransformersVlmConfig):
    """The model ranks the options by their log-likelihood (white-box)."""

    kind: Literal["likelihood"]
    normalise: Literal["sum", "mean"] = "sum"    # SEED-Bench summed the option's token log-likelihoods
    share_prompt: bool = Field(True, json_schema_extra=UNKEYED)  # image+prompt once per question; false: per option

    def build(self, name: str, *, templates, settings, store=None) -> Adapter:
        from evaluation.adapters.likelihood import LikelihoodAdapter
        return LikelihoodAdapter(name, self, templates)


class VlmGenerateConfig(TransformersVlmConfig):
    """The model answers in words with greedy decoding, and the reply is matched to an option (black-box)."""

    kind: Literal["generate"]
    max_new_tokens: int = Field(16, ge=1)        # enough for "Answer: B" or a short option text
    matcher_model: str = ""                      # an LLM that maps unmatched replies to an option; "" for none
    llm: dict[str, Any] = Field(default_factory=dict, json_schema_extra=UNKEYED)  # the matcher's LlmOptions

    def build(self, name: str, *, templates, settings, store=None) -> Adapter:
        from evaluation.adapters.generate import GenerateAdapter
        return GenerateAdapter(name, self, templates, settings=settings, store=store)


class VlmChatConfig(AdapterConfig):
    """An OpenAI-compatible chat endpoint with image input (vLLM, Ollama, the OpenAI API)."""

    kind: Literal["openai"]
    model: str
    max_tokens: int = Field(64, ge=1)
    max_frames: int = Field(8, ge=1)
    image_detail: Literal["auto", "low", "high"] = "auto"
    matcher_model: str = ""                      # an LLM that maps unmatched replies to an option; "" for none
    judge_model: str = ""                        # grade every reply with the judge ensemble (CEE); "" for none
    llm: dict[str, Any] = Field(default_factory=dict, json_schema_extra=UNKEYED)  # LlmOptions: concurrency, limits

    def build(self, name: str, *, templates, settings, store=None) -> Adapter:
        from evaluation.adapters.chat import ChatAdapter
        return ChatAdapter(name, self, templates, settings=settings, store=store)


class BlindBaselineConfig(AdapterConfig):
    """A blind-filter solver answering without the image (`filter.solvers` entries)."""

    kind: Literal["blind"]
    solver: dict[str, Any]

    def build(self, name: str, *, templates, settings, store=None) -> Adapter:
        from evaluation.adapters.blind import BlindAdapter
        return BlindAdapter(name, self, settings=settings, store=store)


AnyAdapterConfig = Annotated[Union[plugins.load_all("adapters")], Field(discriminator="kind")]
