"""Richness filter: keep images whose caption names enough things to ask about, or that come with enough
labelled objects.

SEED-Bench kept images whose caption had more than five nouns. We count nouns (common and proper)
with spaCy's English tagger and take the richest caption an image has. A photo supplied with its instances
(COCO, YOLO, a manifest's objects) also passes on those: `min_objects` objects, crowd regions aside, since
a short caption ("A kitchen with a stove") says little about what such a photo holds. An image with
neither a caption nor enough objects yet is left for later; the filter runs again once captions have been
extracted.

The check is a runner stage keyed by its settings. Each verdict records the noun count and the tagger it
was counted with, so changing `ingest.richness.min_nouns` re-judges from the stored counts (no tagging)
and changes exactly the images whose outcome it changes: newly poor ones are excluded, newly rich ones
come back. Changing the tagger counts again.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from benchsmith import runner
from benchsmith.errors import BenchsmithError
from benchsmith.records import Verdict, stable_hash
from benchsmith.settings import Richness
from benchsmith.store import Store

STAGE = "richness"


def _spacy_only(model: str) -> bool:
    """Whether the pipeline `model` (an installed package or a folder) needs no package beside spaCy, as
    its meta.json says: then none of it runs on torch. Unknown means no."""
    folder = Path(model)
    if not (folder / "meta.json").is_file():
        try:
            spec = importlib.util.find_spec(model)
        except (ImportError, ValueError):
            return False
        if spec is None or not spec.submodule_search_locations:
            return False
        folder = Path(next(iter(spec.submodule_search_locations)))
    try:
        requirements = json.loads((folder / "meta.json").read_text(encoding="utf-8")).get("requirements", [])
        from packaging.requirements import Requirement
        return all(Requirement(r).name == "spacy" for r in requirements)
    except Exception:  # noqa: BLE001 - an unreadable meta.json only means we cannot tell
        return False


@contextmanager
def _torch_hidden(hide: bool):
    """thinc, under spaCy, imports torch whenever it is installed: a second or two of every `ingest`,
    more than the tagging, for a pipeline that never runs on it. Hidden while spaCy is first imported."""
    if not hide or "torch" in sys.modules or "thinc" in sys.modules:
        yield
        return
    sys.modules["torch"] = None  # an import of it raises ImportError, which thinc takes as "not installed"
    try:
        yield
    finally:
        if sys.modules.get("torch", ...) is None:
            del sys.modules["torch"]


@lru_cache(maxsize=2)
def _nlp(model: str):
    try:
        with _torch_hidden(_spacy_only(model)):
            import spacy
            # only the tagger and its tok2vec count nouns: the rest is not even read from disk
            return spacy.load(model, exclude=["parser", "ner", "lemmatizer"])
    except (ImportError, OSError) as exc:
        raise BenchsmithError(f"the richness filter needs spaCy with the '{model}' tagger: "
                           "`make install` (locks/install.txt) "
                           f"(or disable it with ingest.richness.enabled: false) [{exc}]") from None


def count_nouns(captions: Sequence[str], model: str) -> int:
    """Nouns in the richest caption."""
    nlp = _nlp(model)
    return max((sum(tok.pos_ in ("NOUN", "PROPN") for tok in doc) for doc in nlp.pipe(captions)), default=0)


def _outcome(verdict: Verdict | None) -> tuple | None:
    return verdict and (verdict.passed, verdict.reason, verdict.details)


def _subject(image_id: str, verdict: Verdict | None) -> str:
    return f"{image_id}:{stable_hash(_outcome(verdict), length=12)}"


@dataclass(frozen=True)
class Judged:
    """An image to judge: its verdict now, its stored noun count or else its captions to count, and its
    supplied objects (crowd regions aside)."""

    id: str
    verdict: Verdict | None
    nouns: int | None
    captions: tuple[str, ...]
    objects: int = 0


def supplied_objects(annotations: dict) -> int:
    """Objects that came with an image, each one thing: a crowd region is many, not one."""
    return sum(not o.get("crowd") for o in annotations.get("objects", []))


class RichnessStage(runner.Stage):
    """The check as a runner stage. A subject is an image with the outcome of its verdict now, and what is
    recorded done is the image with the verdict it ended with: so a key seen before still re-judges an image
    another key changed since (min_nouns 6, then 1, then 6 again). Images with neither a caption, a stored
    count nor enough objects wait for extraction (unless judged before: a new key judges them again)."""

    name = STAGE

    def __init__(self, settings: Richness) -> None:
        self.settings = settings

    def config_key(self) -> str:
        s = self.settings
        return runner.config_key(s.min_nouns, s.min_objects, s.spacy_model, s.enabled)

    def units(self, context: runner.StageContext) -> list[Judged]:
        if not self.settings.enabled:
            return []
        store = context.store
        earlier = {v.subject_id: v for v in store.get_verdicts(stage=STAGE)}
        counted = {i: v.details["nouns"] for i, v in earlier.items()
                   if v.details.get("spacy_model") == self.settings.spacy_model and v.details.get("nouns") is not None}
        images = store.get_items(kind="image", status=None)
        facts = store.get_facts([i.id for i in images if i.id not in counted], kinds=["caption"])
        units = [Judged(i.id, earlier.get(i.id), counted.get(i.id), () if i.id in counted else tuple(
                        c for c in [*i.annotations.get("captions", []), *(f.text for f in facts.get(i.id, []))]
                        if c.strip()), supplied_objects(i.annotations)) for i in images]
        return [u for u in units if u.nouns is not None or u.captions or u.verdict or self._rich_in_objects(u)]

    def _rich_in_objects(self, unit: Judged) -> bool:
        return 0 < self.settings.min_objects <= unit.objects

    def subject(self, unit: Judged) -> str:
        return _subject(unit.id, unit.verdict)

    def process(self, units: Sequence[Judged], _context: runner.StageContext) -> Iterator[tuple[Judged, Verdict]]:
        s = self.settings
        for unit in units:
            # nouns are counted whenever there is a caption, so a later min_nouns re-judges from the count
            nouns = (unit.nouns if unit.nouns is not None
                     else count_nouns(unit.captions, s.spacy_model) if unit.captions else None)
            passed = (nouns or 0) >= s.min_nouns or self._rich_in_objects(unit)
            reason = ("no caption yet" if nouns is None
                      else f"richest caption has {nouns} nouns, fewer than {s.min_nouns}")
            if s.min_objects:
                reason += f", and {unit.objects} objects, fewer than {s.min_objects}"
            yield unit, Verdict(subject_id=unit.id, subject_kind="item", stage=STAGE, rule="min_nouns_or_objects",
                                passed=passed, reason="" if passed else reason,
                                details={"nouns": nouns, "objects": unit.objects, "spacy_model": s.spacy_model})

    def commit(self, context: runner.StageContext, pairs: list[tuple[Judged, Verdict]],
               report: runner.StageReport) -> list[runner.Outcome]:
        """Write the verdicts whose outcome changed; exclude the newly poor, readmit the newly rich."""
        changed = [(u, v) for u, v in pairs if _outcome(v) != _outcome(u.verdict)]
        excluded = [u.id for u, v in changed if not v.passed and getattr(u.verdict, "passed", True)]
        readmitted = [u.id for u, v in changed if v.passed and getattr(u.verdict, "passed", True) is False]
        context.store.add_verdicts([v for _u, v in changed])
        context.store.set_item_status(excluded, "excluded")
        context.store.set_item_status(readmitted, "ok")
        report.counters.update(judged=len(changed), excluded=len(excluded), readmitted=len(readmitted))
        return [runner.Outcome(_subject(u.id, v), "done") for u, v in pairs]


def apply(store: Store, settings: Richness) -> tuple[int, int, int]:
    """Judge every image not judged under these settings; exclude the poor, readmit the rich. Returns
    (verdicts written, images newly excluded, images readmitted)."""
    counters = runner.run(RichnessStage(settings), store).counters
    return counters["judged"], counters["excluded"], counters["readmitted"]
