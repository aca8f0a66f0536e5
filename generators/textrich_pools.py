"""What the text-rich templates (`textrich`, `textrich_web`) share about a page: what the questions call
it (`noun`), its column headings, and the texts of each role over the collection (`Pools`), the
distractors of reading questions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchsmith.records import normalise_text
from generators import textrich_receipts

PAGE_KINDS = ("chart", "table", "document")


def noun(truth: dict) -> str:
    """What the questions call the page: chart, table, timetable, invoice, receipt or form; a web page's
    layout (shop, results, profile, report)."""
    if truth["kind"] in ("document", "web"):
        return truth["layout"]
    return "timetable" if truth.get("layout") == "schedule" else truth["kind"]


@dataclass(frozen=True)
class Pools:
    """Texts of each role over the collection's pages of one kind (`noun`: a receipt's total among other
    receipts' totals, never among invoices'): titles, legend entries, column headings, buttons, each
    field's values. The distractors of reading questions."""

    texts: dict[str, tuple[str, ...]]
    receipts: dict = field(default_factory=dict)  # scanned receipts' options (`textrich_receipts.design`)

    @classmethod
    def of(cls, truths: Sequence[dict]) -> Pools:
        found: dict[str, set[str]] = defaultdict(set)
        for truth in truths:
            if truth.get("kind") not in (*PAGE_KINDS, "web"):
                continue
            kind = noun(truth)
            found[f"title:{kind}"].add(truth["title"])
            found[f"button:{kind}"].update(truth.get("buttons", ()))
            found[f"legend:{kind}"].update(truth.get("legend", ()))
            found[f"heading:{kind}"].update(headings(truth))
            for name, value in truth.get("fields", {}).items():
                found[f"field:{kind}:{name}"].add(value)
        return cls({role: tuple(sorted(values)) for role, values in sorted(found.items())},
                   textrich_receipts.design(truths))

    def others(self, role: str, present: Sequence[str]) -> list[str]:
        """The role's texts over the collection that this page does not show."""
        shown = {normalise_text(p) for p in present}
        return [t for t in self.texts.get(role, ()) if normalise_text(t) not in shown]


def headings(truth: dict) -> list[str]:
    """The column headings drawn on the page (a receipt may list its items under none)."""
    return [t["text"] for t in truth.get("texts", ()) if t["role"] == "column_heading"]
