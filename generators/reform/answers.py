"""When two answers are one: the normal form they share (`answer_key`) and whether an answer is a number."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from benchsmith.paths import DATA_DIR
from benchsmith.settings import parse_yaml

ALIASES_FILE = DATA_DIR / "answer_aliases.yaml"

_ARTICLES = {"a", "an", "the"}
_PUNCTUATION = re.compile(r"[^\w\s]")


@lru_cache(maxsize=200_000)
def answer_key(text: str) -> str:
    """The form two answers share when they say the same thing in other letters: case, width,
    punctuation, articles, plurals, and the words data/answer_aliases.yaml names (number words,
    translations: "Two dogs." and "2 dog" are one answer, "rouge" and "red" another)."""
    text = _PUNCTUATION.sub(" ", unicodedata.normalize("NFKC", str(text)).casefold())
    aliases = _aliases()
    words = [aliases.get(w, w) for w in text.split() if w not in _ARTICLES]
    return " ".join(_singular(w) for w in words)


@lru_cache(maxsize=1)
def aliases_text() -> str:
    """data/answer_aliases.yaml as read once a run (it shapes which answers are one)."""
    return ALIASES_FILE.read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    groups = parse_yaml(aliases_text())["groups"]
    return {unicodedata.normalize("NFKC", str(word)).casefold(): str(name)
            for name, words in groups.items() for word in words}


_NUMBER = re.compile(r"\d+(?: \d+)?")  # "2.5" is "2 5" once punctuation is gone


def is_number(text: str) -> bool:
    """Whether an answer is a number ("3", "three", "2.5"). Numbers are one answer only when equal: MiniLM
    puts neighbouring ones above any synonym threshold ("2" and "3": 0.87), so it never compares them."""
    return _NUMBER.fullmatch(answer_key(text)) is not None


def _singular(word: str) -> str:
    """English plural endings taken off ('dogs', 'boxes', 'berries'); words that only look plural
    ('glass', 'bus', 'tennis') stay. Rules, not a dictionary: this runs on every answer of a dataset."""
    if len(word) < 4 or not word.isalpha() or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "zes", "sses")):
        return word[:-2]
    return word[:-1]
