"""OpenAI-compatible solver: asks a chat model for the letter of the answer, without the image.

It runs through `benchsmith.llm.LlmClient`, like question generation: concurrent, rate limited,
retried, and cached in the store, so a rerun never pays for the same question twice. With
`use_logprobs` it reads the log-probabilities of the letters A-D in the first token of the reply
(where the endpoint returns them) and ranks all four options; otherwise the chosen letter scores 1 and
the rest 0. A reply that names no letter scores every option alike: the solver does not know. A call
that still fails after its retries gives no prediction, and the question waits for the next run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchsmith.llm import LlmClient, LlmOptions, LlmRequest, LlmResult
from benchsmith.records import LETTERS
from filters.solvers.base import BaseSolver, Prediction, Query

if TYPE_CHECKING:  # annotations only: the settings model builds this solver
    from filters.solvers import ChatConfig

_LETTER = re.compile(r"\b([A-D])\b")
UNLIKELY = -1e4  # a letter missing from the top log-probabilities


class ChatSolver(BaseSolver):
    def __init__(self, config: ChatConfig, *, settings, store=None) -> None:
        super().__init__(config)
        self.client = LlmClient(settings, LlmOptions.model_validate(config.llm), store=store)

    def request(self, query: Query) -> LlmRequest:
        options = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(query.options))
        prompt = self.config.prompt.format(question=query.text, options=options)
        extra: dict[str, Any] = {"logprobs": True, "top_logprobs": self.config.top_logprobs} \
            if self.config.use_logprobs else {}
        return LlmRequest(purpose="solve", model=self.config.model, temperature=0.0, max_tokens=4,
                          messages=[{"role": "user", "content": prompt}], **extra)

    def answer(self, queries: Sequence[Query]) -> list[Prediction | None]:
        results = self.client.run([self.request(q) for q in queries])
        return [self.read(q, r) for q, r in zip(queries, results)]

    def read(self, query: Query, result: LlmResult) -> Prediction | None:
        if not result.ok:
            return None
        n = len(query.options)
        scores = [0.0] * n
        if self.config.use_logprobs and result.logprobs:
            scores = self._letter_logprobs(result.logprobs[0], n)
        else:
            found = _LETTER.search(result.content.strip().upper()[:40])
            if found and LETTERS.index(found.group(1)) < n:
                scores[LETTERS.index(found.group(1))] = 1.0
        return self.predict(scores)

    @staticmethod
    def _letter_logprobs(first_token: dict[str, Any], n: int) -> list[float]:
        best = {letter: UNLIKELY for letter in LETTERS[:n]}
        candidates = first_token.get("top_logprobs") or [first_token]
        for item in candidates:
            letter = (item.get("token") or "").strip().strip(".):").upper()
            if letter in best and item.get("logprob") is not None and math.isfinite(item["logprob"]):
                best[letter] = max(best[letter], item["logprob"])
        return [best[letter] for letter in LETTERS[:n]]
