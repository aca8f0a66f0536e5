"""`publish`: accepted questions into a versioned, Hub-style dataset folder, recorded in the store.

The folder is built beside its final place and moved in only when complete, and the store records
the release only after that, so a crash at any point leaves either nothing or a release that a rerun
of the same version finishes. Re-publishing a version with the same content rebuilds its folder;
with different content it is refused.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from annotation import second_look
from annotation.reconcile import ADJUDICATION
from annotation.signal import COLUMNS as SIGNAL_COLUMNS, review_signal
from benchsmith.dimensions import registry
from benchsmith.errors import BenchsmithError
from publish import conversations as conversation_config
from publish import stats
from publish.card import ALL, Changes, changelog_markdown, render_card
from publish.dataset import uncompressed_bytes, write_data
from publish.entries import Entry, entry_for, media_of, public_name
from publish.lmms_eval import write_task
from publish.media import CleanImages, MediaError
from publish.settings import PublishSettings, releases_root
from benchsmith.records import Release
from benchsmith.settings import Settings
from benchsmith.store import Store
from filters.blind import ACCURACY_COLUMNS, accuracy_table, report as blind_report

VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MARKER = "release.json"
NOT_A_FILTER = {"ingest", "publish"}  # verdict stages that are not question checks


class PublishError(BenchsmithError, ValueError):
    """Publishing cannot go ahead as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Published:
    version: str
    folder: Path
    n_questions: int
    changes: Changes
    per_config: dict[str, int]
    n_conversations: int = 0


def collect_entries(store: Store) -> tuple[list[Entry], int]:
    """The published form of every accepted or published question whose item is still in use, grouped
    by dimension; and how many were left out because their item was excluded."""
    questions = store.get_questions(status=["accepted", "published"])
    items = {item.id: item for item in store.get_items(sorted({q.item_id for q in questions}))}
    answers: dict[str, list[int | None]] = {}
    for review in store.get_reviews([q.id for q in questions]):
        answers.setdefault(review.question_id, []).append(review.answer if review.keep else None)
    dimensions = registry()
    entries = [entry_for(q, items[q.item_id], answers.get(q.id, []), dimensions)
               for q in questions if q.item_id in items]
    entries.sort(key=lambda e: (e.question_type_id, e.question_id))
    return entries, len(questions) - len(entries)


def compare(previous: Release | None, previous_hashes: dict[str, str], hashes: dict[str, str]) -> Changes:
    if previous is None:
        return Changes(None, sorted(hashes), [], [])
    return Changes(previous.version,
                   added=sorted(set(hashes) - set(previous_hashes)),
                   removed=sorted(set(previous_hashes) - set(hashes)),
                   changed=sorted(q for q in set(hashes) & set(previous_hashes) if hashes[q] != previous_hashes[q]))


def _changes_of(release: Release) -> Changes:
    log = release.changelog
    return Changes(release.meta.get("previous"), log.get("added", []), log.get("removed", []),
                   log.get("changed", []), release.meta.get("change_notes", {}))


def extractor_name(key: str) -> str:
    """An extractor's work-ledger key (backend:model:settings hash) as people name it: its model (a local
    path cut to its folder's name), or the annotations that came with the images."""
    backend, _, rest = key.partition(":")
    model = rest.rpartition(":")[0] or rest
    return "annotations supplied with the images" if backend == "supplied" else public_name(model) or backend


def _check_table(store: Store) -> pd.DataFrame:
    def outcome(passed: bool, reason: str) -> str:
        if passed:
            return "passed"
        return "tied, sent for a deciding review" if reason.startswith(ADJUDICATION) else "failed"

    rows = [(stage, rule, outcome(passed, reason), n)
            for (stage, rule, passed, reason), n in store.verdict_counts().items() if stage not in NOT_A_FILTER]
    frame = pd.DataFrame(rows, columns=["stage", "rule", "outcome", "n"])
    return frame.groupby(["stage", "rule", "outcome"], as_index=False)["n"].sum()


def _write_documents(folder: Path, store: Store, settings: Settings, release: Release, entries: list[Entry],
                     shards: dict[str, list[str]], tsv_name: str, repo: str, lmms_task: str, *,
                     history: list[tuple[str, Changes]], changes: Changes,
                     conversations: list[conversation_config.ConversationEntry],
                     conversation_shards: list[str]) -> None:
    """The card with its plots, the changelog of every version, and release.json with content hashes."""
    options = settings.section("publish", PublishSettings)
    hashes = {e.question_id: e.content_hash for e in entries}
    frame = stats.question_frame(store)
    # as they will be once recorded
    frame.loc[frame["question_id"].isin(hashes), ["status", "reached"]] = ["published", stats.FUNNEL_STEPS.index("published")]
    released = frame[frame["question_id"].isin(hashes)]
    tables = stats.stats_tables(frame) | {"dimension_counts": stats.dimension_counts(released),
                                         "answer_balance": stats.answer_balance(released)}
    stats.plot_dimension_counts(tables["dimension_counts"], folder / "plots" / "dimension_counts.png")
    stats.plot_funnel(tables["funnel"], folder / "plots" / "funnel.png")
    stats.plot_answer_balance(tables["answer_balance"], folder / "plots" / "answer_balance.png")

    date = datetime.now(timezone.utc).date().isoformat()
    sizes = {config: uncompressed_bytes(folder, paths) for config, paths in shards.items()}
    sizes[ALL] = sum(sizes.values())
    if conversation_shards:
        sizes[conversation_config.CONFIG] = uncompressed_bytes(folder, conversation_shards)
    extractors = sorted({extractor_name(key) for key, _status in store.extraction_counts()})
    (folder / "README.md").write_text(render_card(
        settings=options, version=release.version, date=date, repo=repo,
        tsv=tsv_name, lmms_task=lmms_task, hub_task=bool(repo), shards=shards, sizes=sizes, entries=entries,
        tables=tables, extractors=extractors,
        blind=(settings.raw.get("filter") or {}).get("blind") or {}, checks=_check_table(store),
        signal=pd.DataFrame(review_signal(store, registry()), columns=SIGNAL_COLUMNS),
        changes=changes, blind_accuracy=pd.DataFrame(accuracy_table(blind_report(store)), columns=ACCURACY_COLUMNS),
        conversations=conversations, conversation_shards=conversation_shards), encoding="utf-8")
    (folder / "CHANGELOG.md").write_text(changelog_markdown([*history, (release.version, changes)]),
                                         encoding="utf-8")
    manifest = {"name": options.name, "version": release.version, "date": date, "previous": changes.previous,
                "n_questions": len(entries), "configs": release.meta["configs"] | {ALL: len(entries)},
                "changes": {"added": len(changes.added), "removed": len(changes.removed),
                            "changed": len(changes.changed)},
                "change_notes": changes.notes, "questions": dict(sorted(hashes.items())),
                "n_conversations": len(conversations),
                "conversations": {e.conversation_id: e.content_hash for e in conversations}}
    (folder / MARKER).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")


def nothing_accepted(store: Store, settings: Settings) -> str:
    """Why there is nothing to publish, and what review still needs."""
    from annotation.settings import ReviewSettings

    in_review = sum(n for (_dimension, status), n in store.question_counts().items() if status == "in_review")
    if not in_review:
        return ("there are no accepted questions to publish: none is in review; run `benchsmith build` (or "
                "`benchsmith review push`) to send questions to Label Studio")
    overlap = settings.section("review", ReviewSettings).overlap
    return (f"there are no accepted questions to publish: {in_review} question(s) in review, each decided once it "
            f"has {overlap} review(s) (review.overlap); review them in Label Studio (or lower review.overlap), then "
            "pull again (`benchsmith review status` shows where they are)")


def publish(store: Store, settings: Settings, version: str, *, out: Path | None = None, repo: str = "",
            allow_changes: bool = False, withdraw: Sequence[str] = (),
            progress: Callable[[int], None] = lambda n: None) -> Published:
    """Build release `version` from the store and record it. `repo` names the Hub repository in the card.

    `withdraw` takes published or accepted questions out of this and every later version (a published
    question keeps its status; the release remembers what was withdrawn). Questions a second look
    withdrew (annotation/second_look.py) are withdrawn the same way, and questions it changed are
    published as changed without `allow_changes`; the CHANGELOG says why for both.
    """
    options = settings.section("publish", PublishSettings)
    if not VERSION.match(version):
        raise PublishError(f"version {version!r} must be 1-64 letters, digits, '.', '_' or '-', starting with a "
                           "letter or digit (e.g. v1.0)")
    entries, left_out = collect_entries(store)
    history = store.get_releases()
    existing = next((r for r in history if r.version == version), None)
    accepted_conversations = store.get_conversations(status=["accepted", "published"])
    unknown = set(withdraw) - {e.question_id for e in entries} - {c.id for c in accepted_conversations}
    if unknown:
        raise PublishError(f"cannot withdraw {', '.join(sorted(unknown))}: not an accepted or published question "
                           "or conversation")
    earlier = history[:history.index(existing)] if existing else history
    looked = second_look.decisions(store)
    looked_withdrawn = second_look.decided_as(looked, "withdrawn")
    withdrawn = set(withdraw).union(looked_withdrawn, *(r.meta.get("withdrawn", []) for r in [*earlier, existing] if r))
    entries = [e for e in entries if e.question_id not in withdrawn]
    conversations = [e for e in conversation_config.collect(store, accepted_conversations)
                     if e.conversation_id not in withdrawn]
    conversation_hashes = {e.conversation_id: e.content_hash for e in conversations}
    if not entries:
        raise PublishError(nothing_accepted(store, settings))
    hashes = {e.question_id: e.content_hash for e in entries}
    if existing is not None and (store.release_hashes(version) != hashes
                                 or store.release_conversation_hashes(version) != conversation_hashes):
        raise PublishError(f"version {version} was already published with different questions; publish the "
                           "current set under a new version")
    previous = earlier[-1] if earlier else None
    previous_hashes = store.release_hashes(previous.version) if previous else {}
    changes = compare(previous, previous_hashes, hashes)
    looked_changed = {qid: v for qid, v in second_look.decided_as(looked, "changed").items()
                      if v.details.get("content_hash") == previous_hashes.get(qid)}
    unexplained = [qid for qid in changes.changed if qid not in looked_changed]
    if unexplained and not allow_changes:
        raise PublishError(f"{len(unexplained)} question(s) published in {previous.version} have changed since "
                           f"without a second look that changed them (e.g. {unexplained[0]}); pass --allow-changes "
                           "to publish them as changed")
    notes = {qid: _note(looked_changed[qid]) for qid in changes.changed if qid in looked_changed}
    notes |= {qid: _note(looked_withdrawn[qid]) for qid in changes.removed if qid in looked_withdrawn}
    changes = Changes(changes.previous, changes.added, changes.removed, changes.changed, notes)

    by_config: dict[str, list[Entry]] = {}
    for entry in entries:
        by_config.setdefault(entry.config, []).append(entry)
    per_config = {config: len(rows) for config, rows in by_config.items()}
    folder = (out or releases_root(settings) / version).resolve()
    release = Release(version=version, question_ids=sorted(hashes), path=str(folder),
                      changelog={"added": changes.added, "removed": changes.removed, "changed": changes.changed},
                      meta={"previous": changes.previous, "configs": per_config, "left_out_excluded_items": left_out,
                            "conversations": len(conversations),
                            "withdrawn": sorted(withdrawn), "change_notes": changes.notes})
    if folder.exists() and not (folder / MARKER).is_file():
        raise PublishError(f"{folder} exists and is not a benchsmith release; choose another --out")
    building = folder.with_name(f".{folder.name}.building")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    try:
        tsv_name = f"vlmevalkit/{options.name}.tsv"
        images = clean_images(settings)
        shards = write_data(by_config, building, images, options, building / tsv_name, progress)
        conversation_shards = conversation_config.write(conversations, building, images, options)
        lmms_task = write_task(building, name=options.name, pretty_name=options.pretty_name, version=version,
                               split=options.split, shards=shards, categories={e.category for e in entries},
                               data_types={e.data_type for e in entries}, repo=repo)
        _write_documents(building, store, settings, release, entries, shards, tsv_name, repo, lmms_task,
                         history=[(r.version, _changes_of(r)) for r in earlier], changes=changes,
                         conversations=conversations, conversation_shards=conversation_shards)
        leaked = find_leaks(building, forbidden_strings(settings))
        if leaked:
            raise PublishError(f"refusing to publish: {', '.join(leaked)} would contain a local path or a secret; "
                               "check item sources and model names in the store")
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    if folder.exists():
        shutil.rmtree(folder)
    building.rename(folder)
    if existing is None:
        store.move_questions([e.question_id for e in entries], "published", stage="publish", reason=version)
        store.move_conversations(list(conversation_hashes), "published", stage="publish", reason=version)
        store.add_release(release, hashes, conversation_hashes)
    return Published(version, folder, len(entries), changes, per_config, len(conversations))


def clean_images(settings: Settings) -> CleanImages:
    """The encoder a release reads its images through, with its cache under the workspace."""
    options = settings.section("publish", PublishSettings)
    return CleanImages(settings.media_dir, settings.cache_dir, options.image_format, options.jpeg_quality)


def published_items(store: Store, entries: Sequence[Entry] | None = None) -> list[str]:
    """The ids of the items whose media the next release shows (questions and conversations); `entries`
    are its question entries, when the caller has collected them already."""
    if entries is None:
        entries, _left_out = collect_entries(store)
    return sorted({e.data_id for e in entries} | {e.data_id for e in conversation_config.collect(store)})


def encode_images(store: Store, settings: Settings, item_ids: Sequence[str]) -> dict[str, int]:
    """Put the clean encoding of every image and frame of `item_ids` in the release's image cache, so that
    `publish` only reads them back; what is cached already is not encoded again. A file that cannot be read
    is counted and left for `publish`, which stops on it with its own error."""
    images = clean_images(settings)
    counts = {"encoded": 0, "reused": 0, "unreadable": 0}
    for item in store.get_items(sorted(item_ids)):
        for relative in media_of(item):
            try:
                counts["encoded" if images.ensure(relative) else "reused"] += 1
            except MediaError:
                counts["unreadable"] += 1
    return counts


def _note(verdict) -> str:
    """Why a second look removed or changed a question, for the CHANGELOG."""
    flags = verdict.details.get("flags") or []
    return verdict.reason + (f" (flagged by the models: {', '.join(flags)})" if flags else "")


def find_leaks(folder: Path, forbidden: Sequence[str]) -> list[str]:
    """Files under `folder` that contain any forbidden string (a local path, a secret). Parquet shards are
    checked on their decoded text columns, since compression can hide a string from a byte scan."""
    needles = [s.encode() for s in forbidden if len(s) > 1]
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix == ".parquet":
            table = pq.read_table(path, columns=[c for c in pq.read_schema(path).names if c != "image"])
            blob = json.dumps(table.to_pylist(), ensure_ascii=False, default=str).encode()
        else:
            blob = path.read_bytes()
        if any(needle in blob for needle in needles):
            found.append(str(path.relative_to(folder)))
    return found


def forbidden_strings(settings: Settings) -> list[str]:
    """What must never reach a release: this machine's workspace and home paths, and every secret."""
    secrets = [value.get_secret_value() for value in settings.secrets.model_dump().values() if value]
    return [str(settings.workspace), str(Path.home()), *secrets]
