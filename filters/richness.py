"""Richness filter: keep images whose caption names enough things to ask about.

SEED-Bench kept images whose caption had more than five nouns. We count nouns (common and proper)
with spaCy's English tagger and take the richest caption an image has. An image with no caption yet is
left for later; the filter runs again once captions have been extracted.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from benchsmith.errors import BenchsmithError
from benchsmith.records import Image, Verdict
from benchsmith.settings import Richness
from benchsmith.store import Store

STAGE = "richness"


@lru_cache(maxsize=2)
def _nlp(model: str):
    try:
        import spacy
        return spacy.load(model, disable=["parser", "ner", "lemmatizer"])
    except (ImportError, OSError) as exc:
        raise BenchsmithError(f"the richness filter needs spaCy with the '{model}' tagger: "
                           "pip install -e '.[local]' -c constraints.txt "
                           f"(or disable it with ingest.richness.enabled: false) [{exc}]") from None


def count_nouns(captions: Sequence[str], model: str) -> int:
    """Nouns in the richest caption."""
    nlp = _nlp(model)
    return max((sum(tok.pos_ in ("NOUN", "PROPN") for tok in doc) for doc in nlp.pipe(captions)), default=0)


def judge(image_id: str, captions: Sequence[str], settings: Richness) -> Verdict:
    nouns = count_nouns(captions, settings.spacy_model)
    passed = nouns >= settings.min_nouns
    return Verdict(subject_id=image_id, subject_kind="item", stage=STAGE, rule="min_nouns", passed=passed,
                   reason="" if passed else f"richest caption has {nouns} nouns, fewer than {settings.min_nouns}",
                   details={"nouns": nouns})


def captions_of(image: Image, caption_facts: Sequence[str]) -> list[str]:
    return [c for c in [*image.annotations.get("captions", []), *caption_facts] if c.strip()]


def apply(store: Store, settings: Richness) -> tuple[int, int]:
    """Judge every image that has a caption and no richness verdict yet; exclude the poor ones.

    Returns (judged, excluded).
    """
    if not settings.enabled:
        return 0, 0
    judged = {v.subject_id for v in store.get_verdicts(stage=STAGE)}
    images = [i for i in store.get_items(kind="image") if i.id not in judged]
    facts = store.get_facts([i.id for i in images], kinds=["caption"])
    verdicts = []
    for image in images:
        captions = captions_of(image, [f.text for f in facts.get(image.id, [])])
        if captions:
            verdicts.append(judge(image.id, captions, settings))
    store.add_verdicts(verdicts)
    excluded = [v.subject_id for v in verdicts if not v.passed]
    store.set_item_status(excluded, "excluded")
    return len(verdicts), len(excluded)
