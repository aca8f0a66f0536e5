"""Which option a free-text reply chooses, in the forms models answer multiple-choice questions in.

Tried in order, first hit wins:
- `letter`: the reply is a bare letter ("B", "(B)", "B."), starts with one followed by punctuation
  ("B. blue", "(B) blue"), names one after "answer", "option" or "choice" ("Answer: B",
  "the correct option is C") or in brackets; several different letters in these forms match nothing;
- `option_text`: the reply contains the text of exactly one option (the longest, where one option's
  text is inside another's).
A reply that matches nothing is a format miss (ReForm-Eval's format hit rate counts them), unless an LLM
matcher (`matcher_model`, `LlmMatcher`) is set: it says which option the reply means, or X for none. The
reply is data inside its prompt, between markers; its calls go through `benchsmith.llm.LlmClient`, kept in
the store like every paid call. Both black-box adapters (`openai`, `generate`) match replies this way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from benchsmith.llm import LlmClient, LlmRequest, LlmResult, stream
from benchsmith.records import LETTERS
from evaluation.records import ModelAnswer, Pass

_BARE = re.compile(r"^\W*\(?([A-D])\)?\W*$")
_LEADING = re.compile(r"^\s*\(?([A-D])(?:\)|\.|:|\s*-)(?:\s|$)")
_PAREN = re.compile(r"\(([A-D])\)")
_NAMED = re.compile(r"\b(?:answer|option|choice)\b(?:\s+(?:is|would be|should be))?\s*[:\-]?\s*\(?([A-D])\)?(?![A-Za-z])",
                    re.IGNORECASE)
_MATCHED_LETTER = re.compile(r"^\W*([A-DX])\b")


def _letter(reply: str, n: int) -> int | None:
    bare = _BARE.match(reply)
    if bare:
        return _index(bare.group(1), n)
    letters = {m.group(1) for m in _NAMED.finditer(reply) if m.group(1).isupper()}
    letters |= set(_PAREN.findall(reply))
    leading = _LEADING.match(reply)
    if leading:
        letters.add(leading.group(1))
    return _index(letters.pop(), n) if len(letters) == 1 else None


def _index(letter: str, n: int) -> int | None:
    index = LETTERS.index(letter)
    return index if index < n else None


def _words(text: str) -> str:
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def _option_text(reply: str, options: Sequence[str]) -> int | None:
    said = _words(reply)
    hits = [i for i, option in enumerate(options) if _words(option).strip() and _words(option) in said]
    # "red" inside "dark red": keep only hits that are not part of another hit
    hits = [i for i in hits if not any(j != i and _words(options[i]) in _words(options[j]) for j in hits)]
    return hits[0] if len(hits) == 1 else None


def match_choice(reply: str, options: Sequence[str]) -> tuple[int | None, str]:
    """(index of the chosen option, the form it was found in), or (None, "") for a format miss."""
    reply = reply.strip()
    letter = _letter(reply, len(options))
    if letter is not None:
        return letter, "letter"
    text = _option_text(reply, options)
    if text is not None:
        return text, "option_text"
    return None, ""


class LlmMatcher:
    def __init__(self, client: LlmClient | None, model: str, template: str) -> None:
        self.client = client
        self.model = model          # "": no matcher, a reply that matches nothing is a format miss
        self.template = template

    def request(self, p: Pass, reply: str) -> LlmRequest:
        prompt = self.template.format(question=p.question.text, options=p.options_block(), reply=reply)
        return LlmRequest(purpose="match", model=self.model, temperature=0.0, max_tokens=4, tag=p.subject,
                          messages=[{"role": "user", "content": prompt}])

    def matched(self, replies: Iterable[tuple[Pass, str | ModelAnswer]]) -> Iterator[tuple[Pass, ModelAnswer]]:
        """Each reply as the option `evaluation.matching` finds in it (an answer already made passes as it
        is); with a matcher model, the replies that match nothing then go to it, each answered with the
        option it reads (None for X), and a failed call is left for the next run."""
        unmatched = []
        for p, reply in replies:
            if isinstance(reply, ModelAnswer):
                yield p, reply
                continue
            choice, form = match_choice(reply, p.options)
            if choice is None and self.model:
                unmatched.append((p, reply))
            else:
                yield p, ModelAnswer(choice=choice, raw=reply, matched_by=form)
        for index, result in stream(self.client, [self.request(p, reply) for p, reply in unmatched]):
            p, reply = unmatched[index]
            if not result.ok:
                yield p, ModelAnswer(retry=f"matcher: {result.reason}")
                continue
            yield p, ModelAnswer(choice=self.read(result, len(p.options)), raw=reply, matched_by="llm")

    @staticmethod
    def read(result: LlmResult, n: int) -> int | None:
        found = _MATCHED_LETTER.match(result.content.strip().upper())
        return None if found is None or found.group(1) == "X" else _index(found.group(1), n)
