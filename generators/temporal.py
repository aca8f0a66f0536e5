"""Questions about videos from their segment annotations: SEED-Bench's three temporal dimensions.

- Action Recognition: which action happens in the clip (or in a time window of it);
- Action Prediction: given the clip up to the end of one action, which action comes next;
- Procedure Understanding: which ordering of the steps is the right one.

Distractors are hard negatives taken offline from the label set: the labels most similar to the
answer (word overlap, then character similarity), never one that is also true of the asked window.
Procedure distractors are the same steps with two neighbours swapped, or one step replaced by a
similar label. With `distractors: llm` the recognition and prediction questions ask the LLM for their
wrong options instead (prompts/temporal_distractors.yaml); an answer that is unusable, or that names
an action also true of the asked window, leaves the offline distractors in place and says so in `meta`. Each question keeps, in `meta.frames`, the sampled frames a reviewer should see.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field

from benchsmith.dimensions import Dimension
from benchsmith.llm import LlmRequest, LlmResult
from benchsmith.records import Provenance, Question, Video, normalise_text, stable_hash
from benchsmith.settings import Strict, parse_yaml
from benchsmith.similarity import matching_ratio, word_overlap
from generators.base import json_format
from generators.llm import fenced

BACKEND = "temporal"
VERSION = "temporal-v1"


class TemporalSettings(Strict):
    frames: int = Field(8, ge=1)                 # frames sampled per video at ingest, kept for review
    per_dimension: int = Field(2, ge=1)          # at most this many questions per video and dimension
    hard_negative_pool: int = Field(6, ge=3)     # distractors are drawn from this many most similar labels
    min_steps: int = Field(3, ge=3)              # a procedure needs at least this many steps
    extra_labels: list[str] = Field(default_factory=list)  # more candidate distractors beside the store's labels
    distractors: Literal["labels", "llm"] = "labels"   # llm: recognition/prediction distractors written by the LLM


def similarity(a: str, b: str) -> float:
    return word_overlap(a, b) + 0.5 * matching_ratio(normalise_text(a), normalise_text(b))


def hard_negatives(answer: str, labels: list[str], exclude: set[str], pool: int, rng: random.Random,
                   n: int = 3) -> list[str]:
    """n labels from the `pool` most similar to `answer`, none equal to it or to anything in `exclude`."""
    banned = {normalise_text(x) for x in exclude} | {normalise_text(answer)}
    candidates: dict[str, str] = {}
    for label in sorted(labels):
        key = normalise_text(label)
        if key not in banned:
            candidates.setdefault(key, label)
    ranked = sorted(candidates.values(), key=lambda label: (-similarity(answer, label), label))
    top = ranked[:max(pool, n)]
    return rng.sample(top, n) if len(top) >= n else []


def _segments(video: Video) -> list[dict]:
    return list(video.annotations.get("segments") or [])


def _frames_until(video: Video, until: float | None) -> list[str]:
    times = video.annotations.get("frame_times") or []
    if until is None or len(times) != len(video.frames):
        return list(video.frames)
    return [frame for frame, t in zip(video.frames, times) if t < until]


def recognition(video: Video, labels: list[str], settings: TemporalSettings, rng: random.Random) -> list[tuple]:
    segments = _segments(video)
    drafts = []
    for segment in segments:
        overlapping = {s["label"] for s in segments if s["start"] < segment["end"] and segment["start"] < s["end"]}
        others = hard_negatives(segment["label"], labels, overlapping, settings.hard_negative_pool, rng)
        if not others:
            continue
        window = "" if len(segments) == 1 else f" between {segment['start']:g} s and {segment['end']:g} s"
        drafts.append((f"What happens in the video{window}?", [segment["label"], *others],
                       {"template": "recognition", "window": [segment["start"], segment["end"]],
                        "true_labels": sorted(overlapping), "frames": list(video.frames)}))
    return drafts


def prediction(video: Video, labels: list[str], settings: TemporalSettings, rng: random.Random) -> list[tuple]:
    segments = _segments(video)
    drafts = []
    for before, after in zip(segments, segments[1:]):
        if after["start"] < before["end"]:
            continue  # overlapping actions have no clear "next"
        others = hard_negatives(after["label"], labels, {before["label"]}, settings.hard_negative_pool, rng)
        if not others:
            continue
        drafts.append((f"The clip is stopped at {before['end']:g} s. What is most likely to happen next?",
                       [after["label"], *others],
                       {"template": "prediction", "window": [0.0, before["end"]],
                        "true_labels": [after["label"]], "frames": _frames_until(video, before["end"])}))
    return drafts


def procedure(video: Video, labels: list[str], settings: TemporalSettings, rng: random.Random) -> list[tuple]:
    steps = video.annotations.get("steps") or [s["label"] for s in _segments(video)]
    if len(steps) < settings.min_steps or len({normalise_text(s) for s in steps}) != len(steps):
        return []
    wrong: list[list[str]] = []
    for i in rng.sample(range(len(steps) - 1), len(steps) - 1):
        swapped = list(steps)
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
        wrong.append(swapped)
    replace_at = rng.randrange(len(steps))
    if substitutes := hard_negatives(steps[replace_at], labels, set(steps), settings.hard_negative_pool, rng, n=1):
        wrong.insert(1, steps[:replace_at] + substitutes + steps[replace_at + 1:])
    options = list(dict.fromkeys(", then ".join(sequence) for sequence in [steps, *wrong]))
    if len(options) < 4:
        return []
    return [("In which order are the steps carried out in the video?", options[:4],
             {"template": "procedure", "steps": steps, "frames": list(video.frames)})]


TEMPLATES = {"action_recognition": recognition, "action_prediction": prediction,
             "procedure_understanding": procedure}


def label_set(videos: list[Video], settings: TemporalSettings) -> list[str]:
    labels = {s["label"] for v in videos for s in _segments(v)}
    labels |= {step for v in videos for step in (v.annotations.get("steps") or [])}
    return sorted(labels | set(settings.extra_labels))


def generate(video: Video, dimension: Dimension, labels: list[str], settings: TemporalSettings,
             seed: int = 0) -> list[Question]:
    """Up to `settings.per_dimension` questions about `video`; the correct option is first."""
    rng = random.Random(stable_hash(seed, video.id, dimension.id))
    drafts = TEMPLATES[dimension.key](video, labels, settings, rng)
    chosen = drafts if len(drafts) <= settings.per_dimension else rng.sample(drafts, settings.per_dimension)
    provenance = Provenance(backend=BACKEND, prompt_version=VERSION, seed=seed,
                            params={"hard_negative_pool": settings.hard_negative_pool})
    return [Question(item_id=video.id, dimension_id=dimension.id, text=text, options=options, answer=0,
                     provenance=provenance, meta=meta | {"generator": BACKEND}) for text, options, meta in chosen]


# -- LLM-written distractors ------------------------------------------------------------------------

PROMPT_FILE = Path(__file__).with_name("prompts") / "temporal_distractors.yaml"
DISTRACTOR_SCHEMA = json_format("distractors", {"distractors": {"type": "array", "minItems": 3, "maxItems": 3,
                                                                "items": {"type": "string", "minLength": 1}}})


@lru_cache(maxsize=4)
def distractor_prompt(path: Path = PROMPT_FILE) -> dict:
    return parse_yaml(path.read_text(encoding="utf-8"))


def llm_distractor_request(prompt_file: Path, dimension: Dimension, llm, tag: str, quoted: dict,
                           **plain: str) -> LlmRequest:
    """A call for three distractors under `llm` (the generate.llm settings): the prompt file's user template
    filled with the dimension, `plain` and `quoted`, the latter JSON-quoted with angle brackets escaped
    (dataset text is data inside the prompt)."""
    prompt = distractor_prompt(prompt_file)
    fields = {k: fenced(json.dumps(v, ensure_ascii=False)) for k, v in quoted.items()}
    user = prompt["user"].strip().format_map({"dimension_name": dimension.name, "definition": dimension.definition,
                                              **plain, **fields})
    return LlmRequest(purpose="generate", model=llm.model_for(dimension), temperature=llm.temperature, seed=llm.seed,
                      max_tokens=llm.max_tokens, messages=[{"role": "system", "content": prompt["system"].strip()},
                                                           {"role": "user", "content": user}],
                      response_format=DISTRACTOR_SCHEMA, tag=tag)


def wants_llm_distractors(question: Question) -> bool:
    return question.meta.get("template") in ("recognition", "prediction")


def distractor_request(question: Question, video: Video, dimension: Dimension, llm) -> LlmRequest:
    labels = [s["label"] for s in _segments(video)]
    if question.meta.get("template") == "prediction":  # only what was shown before the stop
        labels = [s["label"] for s in _segments(video) if s["end"] <= question.meta["window"][1]]
    return llm_distractor_request(PROMPT_FILE, dimension, llm, f"{video.id}:{dimension.key}", {
        "question": question.text, "answer": question.options[question.answer], "labels": labels})


def with_llm_distractors(question: Question, request: LlmRequest, result: LlmResult) -> Question:
    """The question with the LLM's distractors, or unchanged (offline distractors) with the reason why."""
    answer = question.options[question.answer]
    taken = {normalise_text(x) for x in [answer, *question.meta.get("true_labels", [])]}
    reason = result.reason
    if result.ok:
        written = [" ".join(d.split()) for d in result.parsed["distractors"]]
        keys = [normalise_text(d) for d in written]
        if len(set(keys)) < 3:
            reason = "the distractors repeat each other"
        elif set(keys) & taken:
            reason = "a distractor is also a correct action"
        else:
            return question.model_copy(update={
                "options": [answer, *written],
                "provenance": question.provenance.model_copy(update={
                    "model": request.model, "temperature": request.temperature, "seed": request.seed,
                    "prompt_version": distractor_prompt()["version"], "tokens_in": result.tokens_in,
                    "tokens_out": result.tokens_out, "cost_usd": result.cost_usd,
                    "params": question.provenance.params | {"llm_call": result.key}}),
                "meta": question.meta | {"distractors": "llm"}})
    return question.model_copy(update={"meta": question.meta | {"distractors": "labels",
                                                                "llm_distractors_unusable": reason}})
