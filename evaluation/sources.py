"""Where evaluated items come from: a release folder, a Hub dataset, or the store's candidates.

A source holds items of one kind, the kind a protocol evaluates: four-option questions or three-turn
conversations. A release row (the published schema: question, choice_a..d, answer letter, image list,
data_type, question_type_id; or a conversation's instruction_n, reference_n, ...) becomes an
`EvalQuestion` or `EvalConversation` the same way from every source. A folder or dataset that lacks the
question columns is refused with one line that names what is missing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchsmith.dimensions import registry
from benchsmith.records import LETTERS, LEVELS, Turn, pictures, stable_hash
from evaluation.adapters import EvalError
from evaluation.records import EvalConversation, EvalQuestion

Kind = Literal["questions", "conversations"]
COLUMNS = ["question_id", "question", "choice_a", "choice_b", "choice_c", "choice_d", "answer", "image",
           "data_type", "question_type_id"]
SHARDS = {"questions": "data/*/*.parquet", "conversations": "conversations/*.parquet"}
HUB_CONFIG = {"questions": "all", "conversations": "conversations"}


@dataclass(frozen=True)
class Source:
    """The items of one kind a source holds, and the label its eval runs are filed under."""

    label: str                      # release:v1 | folder:<path> | hub:org/name | candidates
    items: list                     # EvalQuestion | EvalConversation


def content_hash(text: str, options: tuple[str, ...], answer: int, data_type: str, digests: list[str]) -> str:
    """Changes whenever anything a model sees changes: `digests` are each frame's sha256 prefix."""
    return stable_hash(text, options, answer, data_type, digests)


def _frames(row: dict[str, Any]) -> tuple[bytes, ...]:
    return tuple(image["bytes"] if isinstance(image, dict) else image for image in row["image"] or [])


def question_of(row: dict[str, Any], dimension: str) -> EvalQuestion:
    frames = _frames(row)
    options = tuple(row[f"choice_{letter.lower()}"] for letter in LETTERS)
    answer = LETTERS.index(row["answer"])
    digests = [hashlib.sha256(frame).hexdigest()[:16] for frame in frames]
    return EvalQuestion(question_id=row["question_id"], text=row["question"], options=options, answer=answer,
                        dimension=dimension, data_type=row["data_type"], frames=frames,
                        image_id=row.get("data_id") or row["question_id"],
                        content_hash=content_hash(row["question"], options, answer, row["data_type"], digests))


def conversation_of(row: dict[str, Any]) -> EvalConversation:
    turns = [Turn(level=row.get(f"level_{n}") or level, task=row.get(f"task_{n}") or "",
                  instruction=row[f"instruction_{n}"], reference=row[f"reference_{n}"],
                  focus_points=list(row.get(f"focus_points_{n}") or []))
             for n, level in enumerate(LEVELS, 1)]
    return EvalConversation.of(row["conversation_id"], turns, _frames(row))


def _dimension_key(type_id: int, fallback: str) -> str:
    try:
        return registry().get(int(type_id)).key
    except (KeyError, ValueError):
        return fallback


def _items_of(kind: Kind, rows: Iterable[dict[str, Any]], columns: Iterable[str], where: str,
              dimension: str = "") -> list:
    """The rows of a shard or dataset as items of `kind`; `dimension` is the fallback a question's
    unknown type id gets."""
    if kind == "conversations":
        return [conversation_of(row) for row in rows]
    missing = [c for c in COLUMNS if c not in set(columns)]
    if missing:
        raise EvalError(f"{where} is not a benchsmith release: it has no {', '.join(missing)} column(s)")
    return [question_of(row, _dimension_key(row["question_type_id"], dimension or row.get("category", "")))
            for row in rows]


def from_folder(folder: Path, kind: Kind = "questions") -> list:
    """Every item of `kind` in a release folder (`data/<dimension>/*.parquet` or `conversations/*.parquet`)."""
    import pyarrow.parquet as pq

    if not folder.is_dir():
        raise EvalError(f"release folder {folder} does not exist")
    shards = sorted(folder.glob(SHARDS[kind]))
    if not shards:
        raise EvalError(f"{folder} is not a benchsmith release with {kind}: no {SHARDS[kind]} shards in it")
    items: list = []
    for shard in shards:
        try:
            table = pq.read_table(shard)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
            raise EvalError(f"cannot read {shard}: {exc}".splitlines()[0]) from None
        items += _items_of(kind, table.to_pylist(), table.column_names, str(shard), shard.parent.name)
    return items


def from_hub(name: str, kind: Kind = "questions") -> list:
    """Every item of `kind` in a published dataset on the Hub (or its local cache): its `test` split."""
    import datasets

    config = HUB_CONFIG[kind]
    try:
        data = datasets.load_dataset(name, config, split="test")
    except Exception as exc:  # noqa: BLE001 - network, auth and format errors all stop here
        raise EvalError(f"cannot load {name!r} ({config}/test) from the Hub: {exc}".splitlines()[0]) from None
    if "image" in data.column_names:
        data = data.cast_column("image", datasets.List(datasets.Image(decode=False)))
    return _items_of(kind, data, data.column_names, name)


def from_store(store, media_dir: Path, kind: Kind = "questions",
               statuses: Iterable[str] = ("candidate", "in_review", "accepted")) -> list:
    """The store's items of `kind` in `statuses` as a model would see them. A question's images stay in
    the media folder until a model needs them; each is read once now, a file at a time, for its digest."""
    found = (store.get_questions if kind == "questions" else store.get_conversations)(status=list(statuses))
    items = {item.id: item for item in store.get_items(sorted({f.item_id for f in found}))}
    dimensions = registry()
    digests: dict[Path, str] = {}
    out: list = []
    for each in found:
        item = items.get(each.item_id)
        if item is None:
            continue
        files = tuple(media_dir / path for path in pictures(item))
        if kind == "conversations":
            out.append(EvalConversation.of(each.id, each.final_turns, [file.read_bytes() for file in files]))
            continue
        for file in files:
            if file not in digests:
                with file.open("rb") as handle:
                    digests[file] = hashlib.file_digest(handle, "sha256").hexdigest()[:16]
        answer = each.final_answer
        options = tuple(each.options)
        out.append(EvalQuestion(
            question_id=each.id, text=each.text, options=options, answer=answer,
            dimension=dimensions.get(each.dimension_id).key, data_type=item.kind, frame_files=files,
            image_id=item.id, content_hash=content_hash(each.text, options, answer, item.kind,
                                                        [digests[f] for f in files])))
    return out


def resolve(*, release: str | None, hub: str | None, candidates: bool, releases_root: Path, store,
            media_dir: Path, kind: Kind = "questions") -> Source:
    """The items of `kind` of the source a command line names: a release version or folder, a Hub
    dataset, or the candidates."""
    if sum(map(bool, (release, hub, candidates))) > 1:
        raise EvalError("name one source: --release, --hub or --candidates")
    if hub:
        return Source(f"hub:{hub}", from_hub(hub, kind))
    if candidates:
        return Source("candidates", from_store(store, media_dir, kind))
    if release is None:
        published = store.get_releases()
        if not published:
            raise EvalError("nothing is published yet: name --release <folder>, --hub org/name or --candidates")
        release = published[-1].version
    folder = Path(release)
    if not folder.is_dir() and (releases_root / release).is_dir():
        return Source(f"release:{release}", from_folder(releases_root / release, kind))
    return Source(f"folder:{folder.resolve()}", from_folder(folder, kind))
