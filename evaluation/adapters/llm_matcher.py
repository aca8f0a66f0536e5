"""Option matching for the black-box adapters (`openai`, `generate`): a reply is matched to an option in
the forms `evaluation.matching` knows, and, as an optional second step, a reply that names no option in
any of them goes to an LLM (`matcher_model`), which says which option it means or X for none.
The reply is data inside the prompt, between markers. Its calls go through `benchsmith.llm.LlmClient`,
kept in the store like every paid call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from benchsmith.llm import LlmClient, LlmRequest, LlmResult, stream
from benchsmith.records import LETTERS
from evaluation.matching import match_choice
from evaluation.records import ModelAnswer, Pass

_MATCHED_LETTER = re.compile(r"^\W*([A-DX])\b")


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
        if found is None or found.group(1) == "X":
            return None
        index = LETTERS.index(found.group(1))
        return index if index < n else None
