"""Judge LLMs: the one shape of a judge call, and how judgements are read and pooled.

Every judge call is one user message at temperature 0 (`judge_request`). A judgement is read from its
last "Score:", "Rating:" or "Verdict:" line; one with no such line is an unparseable vote and does not
count.

- The ensemble for free-text replies to questions (Tiny LVLM-eHub's CEE): every reply is graded under
  each prompt of `judge` in the prompt file (written under two rules that differ only in how they treat
  a right answer with a wrong explanation). Each prompt gives one vote, 1 or 0; the majority of the
  counted votes decides, and a tie, or no counted vote at all, is wrong (a reply is right only when the
  judges say so).
- ConvEval's judges (evaluation/conveval.py): a rating from 1 to 10, pooled by the median (the middle
  judgement, robust to one outlier); a pairwise verdict, pooled by the most common (a draw between
  verdicts is a tie).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from benchsmith.llm import LlmRequest

Outcome = Literal["win", "tie", "lose"]
_SCORE = re.compile(r"score\s*[:=]?\s*\**\s*([01])\b", re.IGNORECASE)
_RATING = re.compile(r"rating\s*[:=]\s*\**\s*(\d{1,2})\b", re.IGNORECASE)
_VERDICT = re.compile(r"verdict\s*[:=]\s*\**\s*(a|b|tie)\b", re.IGNORECASE)


def judge_request(model: str, text: str, max_tokens: int, tag: str = "") -> LlmRequest:
    return LlmRequest(purpose="judge", model=model, temperature=0.0, max_tokens=max_tokens, tag=tag,
                      messages=[{"role": "user", "content": text}])


def cee_requests(model: str, prompts: Sequence, question: str, reference: str, reply: str,
                 tag: str = "") -> list[LlmRequest]:
    """The ensemble's calls on one reply, one per prompt (`Templates.judge`): text only, as the judge
    compares the reply with the reference and never needs the image, so a text-only model can judge."""
    return [judge_request(model, prompt.text.format(question=question, reference=reference, reply=reply), 400, tag)
            for prompt in prompts]


def _last(pattern: re.Pattern, judgement: str) -> str | None:
    found = pattern.findall(judgement)
    return found[-1] if found else None


def read_vote(judgement: str) -> int | None:
    vote = _last(_SCORE, judgement)
    return None if vote is None else int(vote)


def decide(votes: Sequence[int | None]) -> bool:
    counted = [v for v in votes if v is not None]
    return sum(counted) * 2 > len(counted)


def read_rating(judgement: str) -> int | None:
    rating = _last(_RATING, judgement)
    return int(rating) if rating is not None and 1 <= int(rating) <= 10 else None


def read_verdict(judgement: str, model_is_a: bool) -> Outcome | None:
    """The model's outcome from the judge's last verdict line, or None when there is none."""
    verdict = (_last(_VERDICT, judgement) or "").lower()
    if not verdict:
        return None
    if verdict == "tie":
        return "tie"
    return "win" if (verdict == "a") == model_is_a else "lose"


def pooled_score(votes: Sequence[int | None]) -> float | None:
    """The median of the counted ratings; None when no judge gave one."""
    counted = [v for v in votes if v is not None]
    return float(statistics.median(counted)) if counted else None


def pooled_outcome(votes: Sequence[Outcome | None]) -> Outcome | None:
    """The most common counted verdict; a draw between verdicts is a tie; None when none counted."""
    counted = Counter(v for v in votes if v is not None).most_common()
    if not counted:
        return None
    if len(counted) > 1 and counted[0][1] == counted[1][1]:
        return "tie"
    return counted[0][0]
