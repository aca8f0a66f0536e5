"""How alike two texts are: edit distance, difflib's matching ratio, and word overlap (Jaccard).

One measure of each kind, shared by every stage that ranks distractors or spots near duplicates.
"""

from __future__ import annotations

import re
from collections.abc import Set
from difflib import SequenceMatcher
from functools import lru_cache


def levenshtein(a: str, b: str) -> int:
    """Edit distance by Hyyro's bit-parallel algorithm: one pass over `b` with `a` held as bit masks."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    masks: dict[str, int] = {}
    for i, char in enumerate(b):
        masks[char] = masks.get(char, 0) | (1 << i)
    full, last = (1 << len(b)) - 1, 1 << (len(b) - 1)
    plus, minus, score = full, 0, len(b)
    for char in a:
        eq = masks.get(char, 0)
        xv = eq | minus
        xh = (((eq & plus) + plus) ^ plus) | eq
        hp = minus | (~(xh | plus) & full)
        hm = plus & xh
        if hp & last:
            score += 1
        elif hm & last:
            score -= 1
        hp = ((hp << 1) | 1) & full
        hm = (hm << 1) & full
        plus = hm | (~(xv | hp) & full)
        minus = hp & xv
    return score


def matching_ratio(a: str, b: str) -> float:
    """difflib's `SequenceMatcher(None, a, b).ratio()`, the same number, computed without its general
    machinery (junk, match objects): twice the characters in the matching blocks (longest common
    substring first, earliest in `a` on ties, then earliest in `b`; then recursively either side) over
    both lengths. Strings of 200 characters or more go to difflib itself, whose popular-character
    heuristic starts there."""
    la, lb = len(a), len(b)
    if lb >= 200:
        return SequenceMatcher(None, a, b).ratio()
    if not la + lb:
        return 1.0
    matched = 0
    pending = [(0, la, 0, lb)]
    while pending:
        alo, ahi, blo, bhi = pending.pop()
        window = b[blo:bhi]
        best = besti = 0
        i = alo
        while i + best < ahi:
            # a match longer than the best so far starting at i (the string search runs in C)
            if a[i:i + best + 1] in window:
                best += 1
                besti = i
            else:
                i += 1
        if best:
            bestj = blo + window.find(a[besti:besti + best])
            matched += best
            if alo < besti and blo < bestj:
                pending.append((alo, besti, blo, bestj))
            if besti + best < ahi and bestj + best < bhi:
                pending.append((besti + best, ahi, bestj + best, bhi))
    return 2.0 * matched / (la + lb)


def edit_similarity(a: str, b: str) -> float:
    """1 minus the case-insensitive edit distance over the longer length: 1.0 for equal strings."""
    a, b = a.casefold(), b.casefold()
    return _edit_similarity(a, b) if a <= b else _edit_similarity(b, a)


@lru_cache(maxsize=1 << 15)
def _edit_similarity(a: str, b: str) -> float:
    # symmetric, so one entry per pair: a key's neighbours are scored again as options, and keys recur
    return 1 - levenshtein(a, b) / max(len(a), len(b), 1)


_WORD = re.compile(r"\w+")


@lru_cache(maxsize=16_384)
def word_set(text: str) -> frozenset[str]:
    """The casefolded words (runs of letters, digits and underscores) of `text`."""
    return frozenset(_WORD.findall(text.casefold()))


def word_overlap(a: str, b: str) -> float:
    """Shared words over all words (Jaccard) of two texts; 0.0 when neither has a word."""
    return jaccard(word_set(a), word_set(b))


def jaccard(a: Set, b: Set) -> float:
    """The size of the intersection over the size of the union; 0.0 for two empty sets."""
    shared = len(a & b)
    return shared / max(1, len(a) + len(b) - shared)  # the union's size, without building it
