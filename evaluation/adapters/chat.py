"""Black-box evaluation through an OpenAI-compatible chat endpoint with image input.

Each pass is one chat request: the prompt template with the question and its options as shown, and the
image (every image of an image set in order, or up to `max_frames` of a video's frames, evenly spread) as
base64 data URLs, one content part each. The reply is matched to an option (`evaluation.matching`);
replies that match nothing go, when `matcher_model` is set, to an LLM that says which option they mean.
Every call goes through `benchsmith.llm.LlmClient`: concurrent, rate limited, retried and kept in the
store, so a rerun pays for nothing twice.

A call that fails for a passing reason (429, 5xx, timeouts) is left for the next run. A refusal (a 4xx
such as "this model does not take image input") stops the run with that message, since every other
request would be refused the same way; the answers already in are kept.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from benchsmith.llm import LlmClient, LlmOptions, LlmRequest, LlmResult, stream
from benchsmith.records import LETTERS
from evaluation.adapters.base import EvalError
from evaluation.matching import LlmMatcher
from evaluation.judge import cee_requests, read_vote
from evaluation.records import ModelAnswer, Pass, spread
from evaluation.templates import Templates

if TYPE_CHECKING:  # annotations only: the settings model builds this adapter
    from evaluation.adapters import VlmChatConfig

REFUSED = re.compile(r"^HTTP (4(?!08|09|29)\d\d)\b")


def mime_of(data: bytes) -> str:
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "image/jpeg"


def data_url(data: bytes) -> str:
    return f"data:{mime_of(data)};base64,{base64.b64encode(data).decode('ascii')}"


class ChatAdapter:
    def __init__(self, name: str, config: VlmChatConfig, templates: Templates, *, settings, store=None) -> None:
        self.name = name
        self.config = config
        self.templates = templates
        self.client = LlmClient(settings, LlmOptions.model_validate(config.llm), store=store)
        self.matcher = LlmMatcher(self.client, config.matcher_model, templates.matcher)

    def request(self, p: Pass) -> LlmRequest:
        prompt = self.templates.choice[p.template].format(question=p.question.text, options=p.options_block())
        return LlmRequest(purpose="evaluate", model=self.config.model, temperature=0.0,
                          max_tokens=self.config.max_tokens, tag=p.subject,
                          messages=[self.shown(p.question.encoded(self.config.max_frames), prompt)])

    def shown(self, frames: Sequence[bytes], text: str) -> dict:
        """The user message that shows the images (base64 data URLs), then the text."""
        images = [{"type": "image_url", "image_url": {"url": data_url(frame), "detail": self.config.image_detail}}
                  for frame in frames]
        return {"role": "user", "content": [*images, {"type": "text", "text": text}]}

    def predict(self, passes: Sequence[Pass]) -> Iterator[tuple[Pass, ModelAnswer]]:
        answers = self.matcher.matched(self._replies(passes))
        yield from (self._judged(list(answers)) if self.config.judge_model else answers)

    def _replies(self, passes: Sequence[Pass]) -> Iterator[tuple[Pass, str | ModelAnswer]]:
        """Each pass's reply, or the answer that asks for it again later; a refused pass gets neither."""
        for index, result in self.converse([self.request(p) for p in passes]):
            if result.ok:
                yield passes[index], result.content
            elif not REFUSED.match(result.reason):
                yield passes[index], ModelAnswer(retry=result.reason)

    def _judged(self, answers: list[tuple[Pass, ModelAnswer]]) -> Iterator[tuple[Pass, ModelAnswer]]:
        """Each reply graded under every judge prompt; the votes go with the answer."""
        prompts = self.templates.judge
        graded = [(p, a) for p, a in answers if not a.retry]
        yield from ((p, a) for p, a in answers if a.retry)
        requests = [r for p, answer in graded for r in cee_requests(
                        self.config.judge_model, prompts, f"{p.question.text}\n{p.options_block()}",
                        f"({LETTERS[p.key_shown]}) {p.options[p.key_shown]}", answer.raw, p.subject)]
        votes = {index: read_vote(result.content) for index, result in stream(self.client, requests) if result.ok}
        for which, (p, answer) in enumerate(graded):
            ballot = range(which * len(prompts), (which + 1) * len(prompts))   # its calls, one per prompt
            if all(k in votes for k in ballot):
                yield p, replace(answer, votes=tuple(votes[k] for k in ballot))
            else:
                yield p, ModelAnswer(retry="judge: a call failed")

    def turn_request(self, frames: Sequence[bytes], instructions: Sequence[str], earlier: Sequence[str],
                     max_tokens: int, tag: str) -> LlmRequest:
        """The call for the answer to the next turn of a conversation (ConvEval) after `earlier` answers:
        the image with the first instruction, then each earlier answer as the assistant's and each next
        instruction as the user's."""
        messages = [self.shown(spread(frames, self.config.max_frames), instructions[0])]
        for n, answer in enumerate(earlier, 1):
            messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": instructions[n]}]
        return LlmRequest(purpose="evaluate", model=self.config.model, temperature=0.0, max_tokens=max_tokens,
                          tag=tag, messages=messages)

    def converse(self, requests: Sequence[LlmRequest]) -> Iterator[tuple[int, LlmResult]]:
        """Each call's result as it arrives, by its index (a pass's, or a conversation turn's); once all
        are in, a refusal stops the run."""
        refusals = []
        for index, result in stream(self.client, requests):
            if not result.ok and REFUSED.match(result.reason):
                refusals.append(result.reason)
            yield index, result
        if refusals:
            raise EvalError(f"the endpoint refused model {self.config.model!r} ({len(refusals)} of "
                            f"{len(requests)} requests): {refusals[0]}")

    def release(self) -> None:
        pass
