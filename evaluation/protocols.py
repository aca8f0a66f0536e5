"""Evaluation protocols: which passes each question gets, and how a question's passes score.

- `single` (SEED-Bench): one pass, options in their published order, the first prompt template.
- `circular` (MMBench's CircularEval): one pass per rotation of the options; a question counts as
  right only if every rotation is answered right.
- `instability` (ReForm-Eval): `templates` prompt wordings x `shuffles` option orders. Accuracy is the
  share of right passes; instability is the entropy (natural log) of the distribution of the options a
  model chose across the passes, mapped back to the original options, averaged over questions. A
  model that always picks the same option has 0; one that scatters over four has up to ln 4 = 1.39.
A skipped pass (the model cannot take the question) is left out of every score; a format miss counts
as wrong, and as its own outcome in the entropy.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from benchsmith.records import rotation, stable_hash
from evaluation.records import EvalQuestion, Pass

ProtocolName = Literal["single", "circular", "instability"]


class ProtocolSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    templates: int = Field(3, ge=1)     # instability: prompt wordings per question
    shuffles: int = Field(2, ge=1)      # instability: option orders per wording
    seed: int = 0                       # instability: the option shuffles


def passes(questions: Iterable[EvalQuestion], protocol: ProtocolName, settings: ProtocolSettings) -> list[Pass]:
    out: list[Pass] = []
    for q in questions:
        n = len(q.options)
        if protocol == "single":
            out.append(Pass(q))
        elif protocol == "circular":
            out += [Pass(q, f"rot{r}", rotation(n, r)) for r in range(n)]
        else:
            for t in range(settings.templates):
                for s in range(settings.shuffles):
                    order = list(range(n))
                    random.Random(stable_hash(settings.seed, q.question_id, t, s)).shuffle(order)
                    out.append(Pass(q, f"t{t}s{s}", tuple(order), t))
    return out


def templates_used(protocol: ProtocolName, settings: ProtocolSettings) -> int:
    return settings.templates if protocol == "instability" else 1


def question_score(protocol: ProtocolName, correct: Sequence[bool]) -> float | None:
    """A question's score from its scored passes: None when every pass was skipped."""
    if not correct:
        return None
    if protocol == "circular":
        return float(all(correct))
    return sum(correct) / len(correct)


def entropy(choices: Sequence[int | None]) -> float:
    """Entropy (nats) of the options chosen across a question's passes; a miss (None) is an outcome too."""
    counts = Counter(choices)
    total = sum(counts.values())
    return -sum(c / total * math.log(c / total) for c in counts.values()) if total else 0.0
