"""The optional second step of option matching: a reply that names no option in any form
`evaluation.matching` knows goes to an LLM (`matcher_model`), which says which option it means or X
for none. The reply is data inside the prompt, between markers. Used by both black-box adapters
(`openai`, `generate`); its calls go through `benchsmith.llm.LlmClient`, kept in the store like every
paid call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from benchsmith.llm import LlmClient, LlmRequest, LlmResult, stream
from benchsmith.records import LETTERS
from evaluation.records import ModelAnswer, Pass

_MATCHED_LETTER = re.compile(r"^\W*([A-DX])\b")


class LlmMatcher:
    def __init__(self, client: LlmClient, model: str, template: str) -> None:
        self.client = client
        self.model = model
        self.template = template

    def request(self, p: Pass, reply: str) -> LlmRequest:
        prompt = self.template.format(question=p.question.text, options=p.options_block(), reply=reply)
        return LlmRequest(purpose="match", model=self.model, temperature=0.0, max_tokens=4, tag=p.subject,
                          messages=[{"role": "user", "content": prompt}])

    def match(self, unmatched: Sequence[tuple[Pass, str]]) -> Iterator[tuple[Pass, ModelAnswer]]:
        """Each (pass, reply) with the option the matcher read in it (None for X); a failed call is
        left for the next run."""
        requests = [self.request(p, reply) for p, reply in unmatched]
        for index, result in stream(self.client, requests):
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
