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
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from annotation.reconcile import ADJUDICATION
from annotation.signal import COLUMNS as SIGNAL_COLUMNS, review_signal
from benchsmith.dimensions import registry
from benchsmith.errors import BenchsmithError
from publish import conversations as conversation_config
from publish import stats
from publish.card import ALL, Changes, changelog_markdown, render_card
from publish.dataset import uncompressed_bytes, write_data
from publish.entries import Entry, entry_for, public_name
from publish.lmms_eval import write_task
from publish.media import CleanImages, MediaError
from publish.settings import PublishSettings, releases_root
from benchsmith.records import Release, pictures
from benchsmith.settings import Settings
from benchsmith.store import Store
from filters.blind import ACCURACY_COLUMNS, accuracy_table, report as blind_report

VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MARKER = "release.json"
NOT_A_FILTER = {"ingest", "publish", "item_analysis"}  # verdict stages that are not question checks


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
    return Changes(previous.version if previous else None,
                   added=sorted(set(hashes) - set(previous_hashes)),
                   removed=sorted(set(previous_hashes) - set(hashes)),
                   changed=sorted(q for q in set(hashes) & set(previous_hashes) if hashes[q] != previous_hashes[q]))


def _changes_of(release: Release) -> Changes:
    log = release.changelog
    return Changes(release.meta.get("previous"), log.get("added", []), log.get("removed", []),
                   log.get("changed", []), release.meta.get("change_notes", {}), release.meta.get("kinds", {}))


def since_published(store: Store, subject_id: str) -> str:
    """Why an item changed or left since it was last published: the reason of the latest revision or
    withdrawal in its history after its last publish ("" when nothing in review explains it)."""
    why = ""
    for event in store.events(subject_id):
        if event["stage"] == "publish":
            why = ""
        elif event["to_status"] == "withdrawn" or event["from_status"] == event["to_status"]:
            why = event["reason"]
    return why


def extractor_name(key: str) -> str:
    """An extractor's work-ledger key (backend:model:settings hash) as people name it: its model (a local
    path cut to its folder's name), or the annotations that came with the images."""
    backend, _, rest = key.partition(":")
    model = rest.rpartition(":")[0] or rest
    return "annotations supplied with the images" if backend == "supplied" else public_name(model) or backend


def _check_table(store: Store) -> pd.DataFrame:
    rows = [(stage, rule, "passed" if passed else "tied, sent for a deciding review"
             if reason.startswith(ADJUDICATION) else "failed", n)
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
    stats.write_plots(tables, folder / "plots")

    date = datetime.now(timezone.utc).date().isoformat()
    sizes = {config: uncompressed_bytes(folder, paths) for config, paths in shards.items()}
    sizes[ALL] = sum(sizes.values())
    sizes[conversation_config.CONFIG] = uncompressed_bytes(folder, conversation_shards)  # 0 when there are none
    extractors = sorted({extractor_name(key) for key, _status in store.extraction_counts()})
    (folder / "README.md").write_text(render_card(
        settings=options, version=release.version, date=date, repo=repo,
        tsv=tsv_name, lmms_task=lmms_task, shards=shards, sizes=sizes, entries=entries,
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

    `withdraw` takes accepted or published items (questions or conversations) out of this and every later
    version: they move to `withdrawn` once the release is recorded. Items review revised or withdrew
    since they were last published (a kept annotation edited later, a second look) are published as
    changed or removed without `allow_changes`, and the CHANGELOG says why, from their history.
    """
    options = settings.section("publish", PublishSettings)
    if not VERSION.match(version):
        raise PublishError(f"version {version!r} must be 1-64 letters, digits, '.', '_' or '-', starting with a "
                           "letter or digit (e.g. v1.0)")
    entries, left_out = collect_entries(store)
    conversations = conversation_config.collect(store)
    unknown = set(withdraw) - {e.question_id for e in entries} - {e.conversation_id for e in conversations}
    if unknown:
        raise PublishError(f"cannot withdraw {', '.join(sorted(unknown))}: not an accepted or published question "
                           "or conversation")
    withdrawing = {"question": [e.question_id for e in entries if e.question_id in withdraw],
                   "conversation": [e.conversation_id for e in conversations if e.conversation_id in withdraw]}
    entries = [e for e in entries if e.question_id not in withdraw]
    conversations = [e for e in conversations if e.conversation_id not in withdraw]
    if not entries:
        raise PublishError(nothing_accepted(store, settings))
    hashes = {"question": {e.question_id: e.content_hash for e in entries},
              "conversation": {e.conversation_id: e.content_hash for e in conversations}}
    every = hashes["question"] | hashes["conversation"]
    history = store.get_releases()
    existing = next((r for r in history if r.version == version), None)
    if existing is not None and store.release_hashes(version) != every:
        raise PublishError(f"version {version} was already published with different content; publish the "
                           "current set under a new version")
    earlier = history[:history.index(existing)] if existing else history
    previous = earlier[-1] if earlier else None
    published_before = {kind: store.release_hashes(previous.version, kind) if previous else {} for kind in hashes}
    changes = compare(previous, published_before["question"] | published_before["conversation"], every)
    notes = {sid: "withdrawn by the maintainer at publish" for sid in withdraw}
    notes |= {sid: why for sid in [*changes.changed, *changes.removed] if sid not in notes
              for why in [since_published(store, sid)] if why}
    unexplained = [sid for sid in changes.changed if sid not in notes]
    if unexplained and not allow_changes:
        raise PublishError(f"{len(unexplained)} item(s) published in {previous.version} have changed since without "
                           f"a review that changed them (e.g. {unexplained[0]}); pass --allow-changes to publish "
                           "them as changed")
    talks = set(hashes["conversation"]) | set(published_before["conversation"])
    changes = replace(changes, notes=notes, kinds={
        sid: "conversation" for sid in [*changes.added, *changes.removed, *changes.changed] if sid in talks})

    by_config: dict[str, list[Entry]] = {}
    for entry in entries:
        by_config.setdefault(entry.config, []).append(entry)
    per_config = {config: len(rows) for config, rows in by_config.items()}
    folder = (out or releases_root(settings) / version).resolve()
    release = Release(version=version, question_ids=sorted(hashes["question"]), path=str(folder),
                      changelog={"added": changes.added, "removed": changes.removed, "changed": changes.changed},
                      meta={"previous": changes.previous, "configs": per_config, "left_out_excluded_items": left_out,
                            "conversations": len(conversations), "change_notes": changes.notes,
                            "kinds": changes.kinds})
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
        for kind, by_id in hashes.items():
            store.move(kind, list(by_id), "published", stage="publish", reason=version)
            store.move(kind, withdrawing[kind], "withdrawn", stage="publish",
                       reason=f"withdrawn by the maintainer in {version}")
        store.add_release(release, hashes)
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
        for relative in pictures(item):
            try:
                counts["encoded" if images.ensure(relative) else "reused"] += 1
            except MediaError:
                counts["unreadable"] += 1
    return counts


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
