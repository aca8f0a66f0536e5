"""The `conversations` config of a release: one row per accepted three-turn conversation (ConvBench).

Columns per turn n (1 perception, 2 reasoning, 3 creation): `level_n`, `task_n`, `instruction_n`,
`reference_n`, `focus_points_n`. The turns are the reviewed ones when a reviewer edited them. Shards live
under `conversations/`, outside `data/`, so the question configs (and `all`) never pick them up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from publish.dataset import write_shards
from publish.entries import public_name
from publish.settings import PublishSettings
from benchsmith.records import LEVELS, Conversation, Turn, pictures, stable_hash
from benchsmith.store import Store

CONFIG = "conversations"
TURNS = range(1, len(LEVELS) + 1)
FEATURES = datasets.Features({
    "conversation_id": datasets.Value("string"),
    "image": datasets.List(datasets.Image()),
    **{name: feature for n in TURNS for name, feature in (
        (f"level_{n}", datasets.Value("string")), (f"task_{n}", datasets.Value("string")),
        (f"instruction_{n}", datasets.Value("string")), (f"reference_{n}", datasets.Value("string")),
        (f"focus_points_{n}", datasets.List(datasets.Value("string"))))},
    "data_id": datasets.Value("string"),
    "source": datasets.Value("string"),
    "generator": datasets.Value("string"),
    "model": datasets.Value("string"),
    "annotators": datasets.Value("int64"),
})


@dataclass(frozen=True)
class ConversationEntry:
    conversation_id: str
    turns: tuple[Turn, ...]
    media: tuple[str, ...]
    data_id: str
    source: str
    generator: str
    model: str
    annotators: int

    @property
    def content_hash(self) -> str:
        return stable_hash([t.model_dump() for t in self.turns], self.data_id, self.media)


def collect(store: Store, conversations: Sequence[Conversation] | None = None) -> list[ConversationEntry]:
    """Every accepted or published conversation (or those given) whose image is still in use, in id order."""
    if conversations is None:
        conversations = store.get_conversations(status=["accepted", "published"])
    items = {item.id: item for item in store.get_items(sorted({c.item_id for c in conversations}))}
    reviews = store.get_reviews([c.id for c in conversations], kind="conversation")
    reviewers = Counter(cid for cid, _annotation in {(r.conversation_id, r.annotation_id) for r in reviews})
    entries = [ConversationEntry(conversation_id=c.id, turns=tuple(c.final_turns), media=tuple(pictures(item)),
                                 data_id=item.id, source=public_name(item.source), generator=c.provenance.backend,
                                 model=public_name(c.provenance.model), annotators=reviewers[c.id])
               for c in conversations if (item := items.get(c.item_id))]
    return sorted(entries, key=lambda e: e.conversation_id)


def _fields(entry: ConversationEntry) -> dict[str, Any]:
    return vars(entry) | {f"{name}_{n}": getattr(turn, name) for n, turn in zip(TURNS, entry.turns)
                          for name in ("level", "task", "instruction", "reference", "focus_points")}


def write(entries: Sequence[ConversationEntry], folder: Path, encoded: Callable[[str], bytes],
          settings: PublishSettings) -> list[str]:
    """Write the shards; return their paths relative to `folder`."""
    return write_shards(entries, folder, lambda shard, n: f"{CONFIG}/{settings.split}-{shard:05d}-of-{n:05d}.parquet",
                        _fields, FEATURES, settings.shard_rows, encoded)


def card_section(entries: Sequence[ConversationEntry], repo: str, split: str) -> str:
    """The card's paragraph on conversations: how many, and the tasks per level."""
    if not entries:
        return ""
    rows = ["| turn | level | tasks (most common first) |", "|---|---|---|"]
    for n, level in zip(TURNS, LEVELS):
        tasks = Counter(e.turns[n - 1].task or "(unnamed)" for e in entries).most_common(8)
        rows.append(f"| {n} | {level} | " + ", ".join(f"{task} ({count})" for task, count in tasks) + " |")
    return "\n".join([
        "## Conversations", "",
        f"{len(entries)} three-turn conversations about one image each, in the config `{CONFIG}` "
        f"(`load_dataset(\"{repo}\", \"{CONFIG}\", split=\"{split}\")`). Each climbs from perception (turn 1) "
        "to reasoning about what was perceived (turn 2) to creating something from both (turn 3). Per turn "
        "n: `level_n`, `task_n`, `instruction_n`, the reviewed reference answer `reference_n` and the "
        "`focus_points_n` a good answer must hit. They are judged by an LLM against the references "
        "(`benchsmith eval run --protocol conveval`).", "", *rows, ""])
