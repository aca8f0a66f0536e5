"""A question assembled from an annotation and three of its pool's candidates; where the pool is short, the
LLM's distractors top it up (prompts/reform_distractors.yaml)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from benchsmith.dimensions import Dimension
from benchsmith.llm import LlmRequest, LlmResult
from benchsmith.records import Provenance, Question, stable_hash
from generators.reform.answers import answer_key
from generators.reform.parsing import Parsed
from generators.reform.pools import Pools
from generators.reform.ranks import choose_by_rank
from generators.reform.settings import ReformSettings
from generators.temporal import distractor_prompt, llm_distractor_request
from ingest.tasks import TaskKind

BACKEND = "reform"
VERSION = "reform-v3"  # v3: up to caption_keys caption keys; with objects, each caption distractor shown wrong
# v2: numbers compared as numbers; aliases and translations; an image's strings all accepted
PROMPT_FILE = Path(__file__).parents[1] / "prompts" / "reform_distractors.yaml"


@dataclass
class Shortfall:
    """An annotation whose pool gave fewer than three usable distractors: what the LLM is asked to complete."""

    parsed: Parsed
    found: list[dict]        # the usable distractors there were, with how each was chosen


@dataclass
class Result:
    questions: list[Question] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)   # annotation id -> why it gave no question
    short: list[Shortfall] = field(default_factory=list)    # waiting for LLM distractors


def provenance(settings: ReformSettings, seed: int, kind: TaskKind) -> Provenance:
    """One record shared by every question of a kind and settings (never changed in place: a copy is)."""
    return _provenance(kind.key, kind.method, seed, settings.hard_negative_pool, settings.synonym_similarity,
                       settings.paraphrase_overlap, settings.embedding_model)


@lru_cache(maxsize=256)
def _provenance(task: str, method: str, seed: int, hard_negative_pool: int, synonym_similarity: float,
                paraphrase_overlap: float, embedding_model: str) -> Provenance:
    # the settings that shape a question, read directly: dumping the model costs more than the question
    return Provenance(backend=BACKEND, prompt_version=VERSION, seed=seed,
                      params={"task": task, "method": method, "hard_negative_pool": hard_negative_pool,
                              "synonym_similarity": synonym_similarity, "paraphrase_overlap": paraphrase_overlap,
                              "embedding_model": embedding_model})


def to_question(item_id: str, dimension: Dimension, p: Parsed, distractors: list[dict], settings: ReformSettings,
                seed: int, prov: Provenance | None = None, key_rank: int | None = None) -> Question:
    meta = {"generator": BACKEND, "task": p.kind.key, "source_dataset": p.dataset, "annotation_id": p.annotation,
            "key": p.key, "accepted": list(p.accepted), "distractors": distractors}
    if p.kind.method == "answers":
        meta |= {"question_type": p.group, "key_votes": p.extra["votes"], "annotators": p.extra["answers"]}
    if p.kind.method == "regions":
        meta |= {"expression": p.extra["expression"], "box": list(p.extra["box"])}
    if key_rank is not None:
        meta["key_centrality_rank"] = key_rank
    return Question(item_id=item_id, dimension_id=dimension.id, text=p.question,
                    options=[p.key, *(d["text"] for d in distractors)], answer=0,
                    provenance=prov or provenance(settings, seed, p.kind), meta=meta)


def generate(item_id: str, dimension: Dimension, parsed: Sequence[Parsed], skipped: dict[str, str], pools: Pools,
             seed: int = 0) -> Result:
    """One question per usable annotation of the item that feeds `dimension` (`Reading.of` gives them,
    `pools.prepare` readies their pools); the key comes first."""
    settings = pools.settings
    result = Result(skipped=dict(skipped))
    for p in parsed:
        rng = random.Random(stable_hash(seed, item_id, dimension.id, p.annotation, p.key))
        found = pools.candidates(p, item_id)
        if len(found) < 3:
            how = [{"text": t, "similarity": round(s, 4), "how": h} for t, s, h in found]
            if settings.llm_distractors and p.kind.method != "regions":
                result.short.append(Shortfall(p, how))
            else:
                result.skipped[p.annotation] = f"only {len(found)} usable distractor(s), 3 needed"
            continue
        chosen, rank = choose_by_rank(pools.key_ranks(p, [p.key, *(t for t, _s, _h in found)]), len(found), rng)
        distractors = [{"text": found[i - 1][0], "similarity": round(found[i - 1][1], 4), "how": found[i - 1][2],
                        "hardness_rank": i} for i in chosen]
        result.questions.append(to_question(item_id, dimension, p, distractors, settings, seed, key_rank=rank))
    return result


# -- LLM-written distractors for short pools ---------------------------------------------------------

def distractor_request(short: Shortfall, item_id: str, dimension: Dimension, llm) -> LlmRequest:
    p = short.parsed
    return llm_distractor_request(PROMPT_FILE, dimension, llm, f"{item_id}:{dimension.key}:{p.annotation}", {
        "question": p.question, "answer": p.key, "accepted": list(p.accepted),
        "found": [d["text"] for d in short.found]}, task=p.kind.key)


def with_llm_distractors(short: Shortfall, item_id: str, dimension: Dimension, request: LlmRequest,
                         result: LlmResult, pools: Pools, seed: int) -> Question | str:
    """The question with the pool's distractors topped up by the LLM's, or the reason it cannot be made."""
    if not result.ok:
        return f"LLM distractors unusable: {result.reason}"
    p = short.parsed
    distractors = list(short.found)
    taken = {answer_key(d["text"]) for d in distractors}
    for text in (" ".join(d.split()) for d in result.parsed["distractors"]):
        if len(distractors) == 3:
            break
        if not answer_key(text) or answer_key(text) in taken or pools.is_synonym(p, text):
            continue
        taken.add(answer_key(text))
        distractors.append({"text": text, "how": "written by the LLM (the pool was too small)"})
    if len(distractors) < 3:
        return "the LLM's distractors repeat an accepted answer or each other"
    shared, version = provenance(pools.settings, seed, p.kind), distractor_prompt(PROMPT_FILE)["version"]
    prov = shared.model_copy(update={
        "model": request.model, "temperature": request.temperature, "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out, "cost_usd": result.cost_usd,
        "params": shared.params | {"llm_call": result.key, "llm_prompt_version": version}})
    return to_question(item_id, dimension, p, distractors, pools.settings, seed, prov=prov)
