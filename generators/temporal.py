"""Questions about videos from their segment annotations: SEED-Bench's three temporal dimensions.

- Action Recognition: which action happens in the clip (or in a time window of it);
- Action Prediction: given the clip up to the end of one action, which action comes next;
- Procedure Understanding: which ordering of the steps is the right one.

Distractors are hard negatives taken offline from the label set: the labels most similar to the
answer (word overlap, then character similarity), never one that is also true of the asked window.
Procedure distractors are the same steps with two neighbours swapped, or one step replaced by a
similar label. Each question keeps, in `meta.frames`, the sampled frames a reviewer should see.
"""

from __future__ import annotations

import random
from difflib import SequenceMatcher

from pydantic import BaseModel, ConfigDict, Field

from benchsmith.dimensions import Dimension
from benchsmith.records import Provenance, Question, Video, normalise_text, stable_hash

BACKEND = "temporal"
VERSION = "temporal-v1"
DIMENSIONS = ("action_recognition", "action_prediction", "procedure_understanding")


class TemporalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    frames: int = Field(8, ge=1)                 # frames sampled per video at ingest, kept for review
    per_dimension: int = Field(2, ge=1)          # at most this many questions per video and dimension
    hard_negative_pool: int = Field(6, ge=3)     # distractors are drawn from this many most similar labels
    min_steps: int = Field(3, ge=3)              # a procedure needs at least this many steps
    extra_labels: list[str] = Field(default_factory=list)  # more candidate distractors beside the store's labels


def supports(dimension: Dimension) -> bool:
    return dimension.key in DIMENSIONS


def similarity(a: str, b: str) -> float:
    words_a, words_b = set(normalise_text(a).split()), set(normalise_text(b).split())
    overlap = len(words_a & words_b) / max(1, len(words_a | words_b))
    return overlap + 0.5 * SequenceMatcher(None, normalise_text(a), normalise_text(b)).ratio()


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
        if len(segments) == 1:
            text = "What happens in the video?"
        else:
            text = f"What happens in the video between {segment['start']:g} s and {segment['end']:g} s?"
        drafts.append((text, [segment["label"], *others],
                       {"template": "recognition", "window": [segment["start"], segment["end"]],
                        "frames": list(video.frames)}))
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
                        "frames": _frames_until(video, before["end"])}))
    return drafts


def _sequence(steps: list[str]) -> str:
    return ", then ".join(steps)


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
    substitutes = hard_negatives(steps[replace_at], labels, set(steps), settings.hard_negative_pool, rng, n=1)
    if substitutes:
        wrong.insert(1, steps[:replace_at] + substitutes + steps[replace_at + 1:])
    options = [_sequence(steps)]
    for candidate in wrong:
        if _sequence(candidate) not in options:
            options.append(_sequence(candidate))
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
