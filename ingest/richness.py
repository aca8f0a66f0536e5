"""Richness filter: keep images whose caption names enough things to ask about.

SEED-Bench kept images whose caption had more than five nouns. We count nouns (common and proper)
with spaCy's English tagger and take the richest caption an image has. An image with no caption yet is
left for later; the filter runs again once captions have been extracted.

Each verdict records the noun count and the tagger it was counted with, so changing
`ingest.richness.min_nouns` re-judges from the stored counts (no tagging) and changes exactly the images
whose outcome it changes: newly poor ones are excluded, newly rich ones come back. Changing the tagger
counts again.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

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
                           "`make install` (locks/install.txt) "
                           f"(or disable it with ingest.richness.enabled: false) [{exc}]") from None


def count_nouns(captions: Sequence[str], model: str) -> int:
    """Nouns in the richest caption."""
    nlp = _nlp(model)
    return max((sum(tok.pos_ in ("NOUN", "PROPN") for tok in doc) for doc in nlp.pipe(captions)), default=0)


def judge(image_id: str, nouns: int, settings: Richness) -> Verdict:
    passed = nouns >= settings.min_nouns
    return Verdict(subject_id=image_id, subject_kind="item", stage=STAGE, rule="min_nouns", passed=passed,
                   reason="" if passed else f"richest caption has {nouns} nouns, fewer than {settings.min_nouns}",
                   details={"nouns": nouns, "spacy_model": settings.spacy_model})


def captions_of(image: Image, caption_facts: Sequence[str]) -> list[str]:
    return [c for c in [*image.annotations.get("captions", []), *caption_facts] if c.strip()]


def _outcome(verdict: Verdict | None) -> tuple | None:
    return verdict and (verdict.passed, verdict.reason, verdict.details)


class Outcome(NamedTuple):
    judged: int       # verdicts written: images judged for the first time or whose verdict changed
    excluded: int     # images newly excluded
    readmitted: int   # images excluded before that pass now


def apply(store: Store, settings: Richness) -> Outcome:
    """Judge every captioned image not yet judged under these settings; exclude the poor, readmit the rich."""
    if not settings.enabled:
        return Outcome(0, 0, 0)
    earlier = {v.subject_id: v for v in store.get_verdicts(stage=STAGE)}
    images = store.get_items(kind="image", status=None)
    uncounted = [i for i in images
                 if i.id not in earlier or earlier[i.id].details.get("spacy_model") != settings.spacy_model]
    facts = store.get_facts([i.id for i in uncounted], kinds=["caption"])
    nouns = {i.id: earlier[i.id].details["nouns"] for i in images if i.id in earlier}
    for image in uncounted:
        captions = captions_of(image, [f.text for f in facts.get(image.id, [])])
        if captions:
            nouns[image.id] = count_nouns(captions, settings.spacy_model)
    verdicts = [verdict for image_id, count in nouns.items()
                if _outcome(verdict := judge(image_id, count, settings)) != _outcome(earlier.get(image_id))]
    store.add_verdicts(verdicts)
    excluded = [v.subject_id for v in verdicts if not v.passed and getattr(earlier.get(v.subject_id), "passed", True)]
    readmitted = [v.subject_id for v in verdicts if v.passed and getattr(earlier.get(v.subject_id), "passed", True) is False]
    store.set_item_status(excluded, "excluded")
    store.set_item_status(readmitted, "ok")
    return Outcome(len(verdicts), len(excluded), len(readmitted))
