"""Keeping secret values out of every text we print, store or hand to Prefect.

Providers echo the API key back in their error messages, whole or partly masked ("sk-abc...wxyz1234"),
and exceptions can carry it too. `scrub` takes out every known secret and every run of
`FRAGMENT` or more of its characters. The known secrets are the secret environment variables plus
every secret the settings loaded (`remember`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from itertools import groupby

SECRET_ENV = ("OPENAI_API_KEY", "LABEL_STUDIO_API_KEY", "HF_TOKEN")
FRAGMENT = 8          # this many characters of a key in a row count as the key
MIN_SECRET = 6        # shorter values (placeholders like "x") would scrub ordinary words
REDACTED = "[redacted]"

_remembered: set[str] = set()


def remember(*values: str | None) -> None:
    """Add secret values that `scrub` must remove from now on in this process."""
    _remembered.update(v for v in values if v and len(v) >= MIN_SECRET)


def known() -> set[str]:
    from_env = {os.environ.get(name, "") for name in SECRET_ENV}
    return _remembered | {v for v in from_env if len(v) >= MIN_SECRET}


def scrub(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with each secret, and each run of FRAGMENT+ characters of one, replaced by [redacted]."""
    if not text:
        return text
    secrets = [s for s in (known() if secrets is None else secrets) if s]
    hidden = [False] * len(text)
    for secret in secrets:
        width = min(FRAGMENT, len(secret))
        pieces = {secret[i:i + width] for i in range(len(secret) - width + 1)}
        for start in range(len(text) - width + 1):
            if text[start:start + width] in pieces:
                hidden[start:start + width] = [True] * width
    if not any(hidden):
        return text
    runs = groupby(zip(hidden, text), key=lambda pair: pair[0])  # each run of hidden characters: one REDACTED
    return "".join(REDACTED if secret else "".join(char for _, char in run) for secret, run in runs)
