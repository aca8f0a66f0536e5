"""The dataset card: YAML metadata the Hub reads, then the story of the release in markdown.

The prose lives in `card.md` beside this file; this module only computes what fills it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

import pandas as pd
import yaml

from publish import conversations as conversation_config
from publish.dataset import FEATURES
from publish.entries import Entry, public_name
from publish.settings import PublishSettings
from publish.stats import markdown_table

TEMPLATE = Path(__file__).with_name("card.md")
ALL = "all"
KINDS = {"image": "single images", "image_set": "image sets", "video": "videos"}  # data_type -> how the card says it
SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated blocks out in full: the Hub's card parser should not have to resolve anchors."""

    def ignore_aliases(self, data) -> bool:
        return True


@dataclass(frozen=True)
class Changes:
    previous: str | None
    added: list[str]
    removed: list[str]
    changed: list[str]
    notes: dict[str, str] = field(default_factory=dict)  # item id -> why it was removed or changed
    kinds: dict[str, str] = field(default_factory=dict)  # item id -> its kind, for items not questions


def metadata(settings: PublishSettings, shards: dict[str, list[str]], counts: dict[str, int],
             sizes: dict[str, int], conversation_shards: Sequence[str] = ()) -> dict:
    """The card's YAML block: configs (each dimension, `all` over every question shard, and
    `conversations` when there are any), features, sizes.
    `datasets` ignores (with a warning) a split that lacks its name, num_examples or num_bytes."""
    split = settings.split
    files = {ALL: f"data/*/{split}-*.parquet", **shards}
    features = dict.fromkeys(files, FEATURES)
    if conversation_shards:
        files[conversation_config.CONFIG] = list(conversation_shards)
        features[conversation_config.CONFIG] = conversation_config.FEATURES
    configs = [{"config_name": name, **({"default": True} if name == ALL else {}),
                "data_files": [{"split": split, "path": path}]} for name, path in files.items()]
    infos = [{"config_name": name, "features": features[name]._to_yaml_list(),
              "splits": [{"name": split, "num_bytes": sizes[name], "num_examples": counts[name]}]} for name in files]
    return {"pretty_name": settings.pretty_name, "license": settings.license, "language": settings.language,
            "task_categories": settings.task_categories, "tags": settings.tags,
            "size_categories": [next((label for bound, label in SIZE_CATEGORIES if counts[ALL] < bound), "1M<n<10M")], "configs": configs, "dataset_info": infos}


def _listing(values: Sequence[str]) -> str:
    return ", ".join(f"`{v}`" for v in values) if values else "none recorded"


def filter_summary(blind: dict) -> str:
    """The blind-filter rule and solvers from the `filter.blind` settings the release was built with."""
    if not blind:
        return "No blind-filter settings were recorded."
    solvers = [public_name(s.get("model")) or s.get("kind", "?") for s in blind.get("solvers") or []]
    parts = [f"Rule `{blind.get('rule', '?')}`"]
    parts += [f"{key.replace('_', ' ')} {blind[key]}" for key in ("max_right", "rotations") if key in blind]
    return ", ".join(parts) + f"; solvers: {_listing(solvers)}."


def review_summary(entries: Sequence[Entry]) -> str:
    reviewed = [e for e in entries if e.annotators]
    if not reviewed:
        return "No review records were kept for these questions."
    mean = sum(e.agreement for e in reviewed) / len(reviewed)
    overlap = sum(e.annotators > 1 for e in reviewed)
    return (f"{len(reviewed)} of {len(entries)} questions carry review records; {overlap} were answered by "
            f"more than one annotator, and on average {mean:.0%} of annotators chose the published answer.")


def changes_text(changes: Changes) -> str:
    if changes.previous is None:
        return "First release."
    return (f"Since {changes.previous}: {len(changes.added)} added, {len(changes.removed)} removed, "
            f"{len(changes.changed)} changed. `CHANGELOG.md` lists the ids.")


def render_card(*, settings: PublishSettings, version: str, date: str, repo: str, tsv: str, lmms_task: str,
                shards: dict[str, list[str]], sizes: dict[str, int], entries: Sequence[Entry],
                tables: dict[str, pd.DataFrame], extractors: Sequence[str], blind: dict, checks: pd.DataFrame,
                signal: pd.DataFrame, changes: Changes, blind_accuracy: pd.DataFrame,
                conversations: Sequence[conversation_config.ConversationEntry] = (),
                conversation_shards: Sequence[str] = ()) -> str:
    """The card's markdown. `blind_accuracy` is `filters.blind.accuracy_table` over the store's verdicts."""
    counts = {config: sum(e.config == config for e in entries) for config in shards} | {ALL: len(entries)}
    counts[conversation_config.CONFIG] = len(conversations)
    generators = sorted({f"{e.generator} ({e.model})" if e.model else e.generator for e in entries})
    meta = yaml.dump(metadata(settings, shards, counts, sizes, conversation_shards), Dumper=_PlainDumper, sort_keys=False,
                     allow_unicode=True).strip()
    # A release not uploaded (yet) is loaded from its folder; the card never holds a local path.
    where = repo or f"path/to/{version}"
    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        metadata=meta, pretty_name=settings.pretty_name, description=settings.description, version=version,
        date=date, n_questions=len(entries), n_dimensions=len(shards),
        by_kind=", ".join(f"on {label}: {sum(e.data_type == kind for e in entries)}" for kind, label in KINDS.items()),
        where=where, split=settings.split,
        where_note="" if repo else "# the path of this release's folder (it is not on the Hub)",
        download=f"hf download {repo} --repo-type dataset --local-dir {settings.name}" if repo else "",
        local_folder=settings.name if repo else where, example_config=next(iter(shards)), tsv=tsv,
        lmms_task=lmms_task, lmms_hub=(f"Without downloading the data first, `--tasks {lmms_task}_hub` reads `{repo}` "
                                       f"at tag `{version}` from the Hub; then only the `lmms_eval/` folder is "
                                       "needed locally.") if repo else "",
        dimension_table=markdown_table(tables["dimension_counts"]), extractors=_listing(extractors),
        generators=_listing(generators), filter_summary=filter_summary(blind), checks_table=markdown_table(checks),
        blind_table=markdown_table(blind_accuracy),
        review_summary=review_summary(entries), signal_table=markdown_table(signal),
        funnel_table=markdown_table(tables["funnel"]), answer_table=markdown_table(tables["answer_balance"]),
        changes=changes_text(changes),
        conversations=conversation_config.card_section(conversations, where, settings.split),
        conversation_count=f", and {len(conversations)} three-turn conversations" if conversations else "",
    )


def changelog_markdown(history: Sequence[tuple[str, Changes]]) -> str:
    """Every version, newest first, with the ids it added, removed and changed."""
    out = ["# Changelog", ""]
    for version, changes in reversed(history):
        out += [f"## {version}", "", changes_text(changes), ""]
        for label, ids in (("Added", changes.added), ("Removed", changes.removed), ("Changed", changes.changed)):
            if ids and changes.previous is not None:
                out += [f"### {label} ({len(ids)})", "",
                        *[f"- {changes.kinds[sid] + ' ' if sid in changes.kinds else ''}`{sid}`" +
                          (f": {changes.notes[sid]}" if sid in changes.notes else "") for sid in ids], ""]
    return "\n".join(out)
