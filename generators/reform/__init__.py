"""Multiple-choice questions reformulated from annotated datasets (ReForm-Eval's idea), with no LLM.

A maintainer who already holds VQA answers, class labels, captions, referring expressions or OCR ground
truth ingests them with a task kind (`task` column or `benchsmith ingest --task`); each row's columns are
kept with its image under `annotations.reform`. The kinds live in data/reform_tasks.yaml: which
dimension each feeds, its question, which column gives which field, and one of five methods:

- `answers` (open VQA): the key is the annotators' majority answer; distractors are answers to other
  questions of the same type in the same dataset, nearest to the key by MiniLM similarity;
- `classes` (classification): the key is the label; distractors the nearest class names of the dataset;
- `captions` (image-text matching): up to `caption_keys` questions an image, each keyed by another of its
  captions; distractors are captions of other images with the most words in common (TF-IDF cosine), one
  an image. Where the image comes with objects (COCO instances, exhaustive for their classes), a key names
  one of them and nothing the image lacks, and every distractor names a label the image has no object of
  (data/caption_objects.yaml, `captions.py`), so it is shown wrong, never merely unlike the key;
- `regions` (referring expressions): options are boxes; distractors the image's other regions, those of
  the referent's category first;
- `texts` (text reading): the key is a ground-truth string; distractors are other images' strings
  nearest in edit distance.

A distractor is never an accepted answer: not equal to any annotator's answer (or the image's other
captions, texts, or the label's own synonyms) after normalising case, punctuation, articles, plurals
and the aliases of data/answer_aliases.yaml (number words, translations), and not a synonym of one
(MiniLM similarity at or above `synonym_similarity`, never asked of two numbers; word overlap at or
above `paraphrase_overlap` for captions, or, for an image with objects, a caption that names nothing it
lacks; a box overlapping the referent). Among the
`hard_negative_pool` hardest candidates left, three are chosen so that the key's rank by closeness to
the others is drawn uniformly: hard negatives made around the key would otherwise make it the option
most like the rest, which a text-only solver spots.

Each question records in `meta` where it came from (`source_dataset`, `annotation_id`, `task`), every
accepted answer, and how each distractor was chosen. An annotation that cannot become a question (a
column the kind needs is missing, no answers, fewer than three usable distractors) is skipped with its
reason; with `llm_distractors: true` a short pool is topped up by the LLM instead
(prompts/reform_distractors.yaml).

The task kinds are ingest's (`ingest.tasks`); each module here does one job, named in its docstring.
"""

from __future__ import annotations

from pathlib import Path

from benchsmith.dimensions import Dimension
from generators.reform.answers import aliases_text
from generators.reform.pools import Pools
from generators.reform.questions import PROMPT_FILE, VERSION, distractor_request, generate, with_llm_distractors
from generators.reform.settings import ReformSettings
from ingest.tasks import TaskKind, load_tasks, records_of

__all__ = ["PROMPT_FILE", "VERSION", "Pools", "ReformSettings", "TaskKind", "aliases_text", "distractor_request",
           "generate", "load_tasks", "records_of", "supports", "with_llm_distractors"]


def supports(dimension: Dimension, path: Path | None = None) -> bool:
    return any(kind.dimension == dimension.key for kind in load_tasks(path).values())
