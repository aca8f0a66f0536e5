"""MiniLM sentence vectors, computed in a forked process of their own."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from benchsmith.errors import BenchsmithError
from generators.reform.settings import ReformSettings

if TYPE_CHECKING:  # numpy is imported where it is used: every command imports the generator for its settings
    import numpy as np


class Embeddings:
    """MiniLM vectors of short texts, kept for the run. The model works in a process of its own
    (`start`): it loads there while this process reads the annotations, and torch never enters this
    process, so the workers the runner forks later hold none of it."""

    def __init__(self, settings: ReformSettings) -> None:
        self.settings = settings
        self.vectors: dict[str, np.ndarray] = {}
        self._encoder: _Encoder | None = None
        self._sent: list[list[str]] = []   # asked for, not read back yet
        self._asked: set[str] = set()

    def start(self) -> None:
        """Start the model's process now, so it loads while this one goes on."""
        if self._encoder is None:
            self._encoder = _Encoder(self.settings)

    def prefetch(self, texts: Iterable[str]) -> None:
        """Ask for the vectors of `texts` without waiting for them; the next `add` reads them back."""
        if missing := sorted(set(texts) - self.vectors.keys() - self._asked):
            self.start()
            self._encoder.send(missing)
            self._sent.append(missing)
            self._asked.update(missing)

    def add(self, texts: Iterable[str]) -> None:
        """Embed the texts not embedded yet, and wait for every vector asked for."""
        self.prefetch(texts)
        while self._sent:
            self.vectors.update(zip(self._sent.pop(0), self._encoder.receive()))
        self._asked.clear()

    def release(self) -> None:
        """Stop the model's process (the vectors stay); a text embedded later starts it again."""
        if self._encoder is not None:
            self.add(())
            self._encoder.stop()
            self._encoder = None

    def matrix(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np
        return np.stack([self.vectors[t] for t in texts]) if texts else np.zeros((0, 1), np.float32)


class _Encoder:
    """A forked process holding the sentence model: texts in, float32 vectors out, in order."""

    def __init__(self, settings: ReformSettings) -> None:
        import multiprocessing

        context = multiprocessing.get_context("fork")  # starts in milliseconds: nothing to import again
        self._connection, theirs = context.Pipe()
        self._process = context.Process(target=_encode_texts, args=(settings, theirs), name="minilm", daemon=True)
        self._process.start()
        theirs.close()
        self._stopped = weakref.finalize(self, _stop, self._process, self._connection)

    def send(self, texts: list[str]) -> None:
        self._connection.send(texts)

    def receive(self) -> np.ndarray:
        try:
            kind, value = self._connection.recv()
        except EOFError:
            self._process.join()
            raise BenchsmithError(f"the MiniLM process ended (exit code {self._process.exitcode})") from None
        if kind == "error":
            raise BenchsmithError(value)
        return value

    def stop(self) -> None:
        self._stopped()


def _stop(process, connection) -> None:
    try:
        connection.send(None)
    except OSError:
        pass
    connection.close()
    process.join(timeout=10)
    if process.is_alive():
        process.terminate()


def _encode_texts(settings: ReformSettings, connection) -> None:
    """The MiniLM process: load the model, then answer each list of texts with their vectors."""
    try:
        import numpy as np
        import torch

        from benchsmith.models import load_sentence_model

        # the same vectors with any thread count (not with another batch size); a second thread that
        # shares its core with other work waits for it at every layer, one core alone does not
        torch.set_num_threads(settings.embedding_threads or torch.get_num_threads())
        model = load_sentence_model(settings.embedding_model, settings.device)
    except Exception as exc:  # noqa: BLE001 - told to the parent, which raises it
        model, failure = None, str(exc) if isinstance(exc, BenchsmithError) else f"{type(exc).__name__}: {exc}"
    while (texts := connection.recv()) is not None:
        if model is None:
            connection.send(("error", failure))
            continue
        try:
            vectors = model.encode(texts, batch_size=settings.embedding_batch_size, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
            connection.send(("vectors", vectors.astype(np.float32)))
        except Exception as exc:  # noqa: BLE001
            connection.send(("error", f"embedding {len(texts)} texts failed: {type(exc).__name__}: {exc}"))
