"""Choosing three distractors so that the key's rank by closeness to the other options is uniform."""

from __future__ import annotations

import itertools
import random
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@lru_cache(maxsize=16)
def _triples(n: int) -> np.ndarray:
    import numpy as np
    return np.array(list(itertools.combinations(range(1, n + 1), 3)), dtype=np.intp).reshape(-1, 3)


@lru_cache(maxsize=16)
def _triple_terms(n: int) -> np.ndarray:
    """For every triple (a, b, c) of `_triples(n)`, the flat positions in the (n + 1)-square similarity
    matrix of s[0,a] s[0,b] s[0,c], s[a,0] s[a,b] s[a,c], s[b,0] s[b,a] s[b,c], s[c,0] s[c,a] s[c,b]:
    one gather instead of twelve fancy indexings per question."""
    import numpy as np
    a, b, c = _triples(n).T
    size, zero = n + 1, np.zeros_like(a)
    pairs = [(zero, a), (zero, b), (zero, c), (a, zero), (a, b), (a, c),
             (b, zero), (b, a), (b, c), (c, zero), (c, a), (c, b)]
    return np.stack([row * size + column for row, column in pairs])


def key_ranks(similarity) -> bytes:
    """For each triple of candidates (`_triples`; indices 1.. of `similarity`, row/column 0 being the key),
    the key's rank among the four options by summed similarity to the other three (0: the key is the
    option most like the rest)."""
    import numpy as np
    s = np.asarray(similarity, dtype=np.float64)
    t = s.ravel()[_triple_terms(s.shape[0] - 1)]
    key = t[0] + t[1] + t[2]
    others = np.stack([t[3] + t[4] + t[5], t[6] + t[7] + t[8], t[9] + t[10] + t[11]])
    return bytes((others > key + 1e-9).sum(axis=0).tolist())


@lru_cache(maxsize=16)
def _triple_list(n: int) -> list[list[int]]:
    return _triples(n).tolist()


def choose_by_rank(ranks: bytes, n: int, rng: random.Random) -> tuple[list[int], int]:
    """Three of the `n` candidates (indices 1..n) such that the key's rank among the four options, as
    `key_ranks` gave it, is drawn uniformly; returns them and the rank. A rank no triple allows is drawn
    again, so a small pool still gives a question."""
    rank = next(r for r in rng.sample(range(4), 4) if r in ranks)
    allowed = [i for i, r in enumerate(ranks) if r == rank]
    return list(_triple_list(n)[allowed[rng.randrange(len(allowed))]]), rank
