"""The judge ensemble for free-text replies (Tiny LVLM-eHub's CEE).

Every reply is graded by a judge LLM under each prompt of `judge` in the prompt file (written under two
rules that differ only in how they treat a right answer with a wrong explanation). Each prompt gives one
vote, 1 or 0, read from the last "Score: n" in the judge's text; a judgement with no such line is an
unparseable vote and does not count. The majority of the counted votes decides; a tie, or no counted
vote at all, is wrong (a reply is right only when the judges say so).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from benchsmith.llm import LlmRequest
from evaluation.templates import JudgePrompt

_SCORE = re.compile(r"score\s*[:=]?\s*\**\s*([01])\b", re.IGNORECASE)


def judge_requests(model: str, prompts: Sequence[JudgePrompt], question: str, reference: str, reply: str,
                   tag: str = "") -> list[LlmRequest]:
    return [LlmRequest(purpose="judge", model=model, temperature=0.0, max_tokens=400, tag=tag,
                       messages=[{"role": "user", "content": prompt.text.format(
                           question=question, reference=reference, reply=reply)}])
            for prompt in prompts]


def read_vote(judgement: str) -> int | None:
    votes = _SCORE.findall(judgement)
    return int(votes[-1]) if votes else None


def decide(votes: Sequence[int | None]) -> bool:
    counted = [v for v in votes if v is not None]
    return sum(counted) * 2 > len(counted)
