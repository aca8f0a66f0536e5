"""Where evaluated questions come from: a release folder, a Hub dataset, or the store's candidates.

A release row (the published schema: question, choice_a..d, answer letter, image list, data_type,
question_type_id) becomes an `EvalQuestion` the same way from every source. A folder or dataset that
lacks those columns is refused with one line that names what is missing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchsmith.dimensions import registry
from benchsmith.records import LETTERS, stable_hash
from evaluation.adapters import EvalError
from evaluation.records import EvalQuestion

COLUMNS = ["question_id", "question", "choice_a", "choice_b", "choice_c", "choice_d", "answer", "image",
           "data_type", "question_type_id"]


@dataclass(frozen=True)
class Source:
    """A set of questions and the label its eval runs are filed under."""

    label: str                      # release:v1 | folder:<path> | hub:org/name | candidates
    questions: list[EvalQuestion]


def content_hash(text: str, options: tuple[str, ...], answer: int, data_type: str, digests: list[str]) -> str:
    """Changes whenever anything a model sees changes: `digests` are each frame's sha256 prefix."""
    return stable_hash(text, options, answer, data_type, digests)


def question_of(row: dict[str, Any], dimension: str) -> EvalQuestion:
    frames = tuple(image["bytes"] if isinstance(image, dict) else image for image in row["image"] or [])
    options = tuple(row[f"choice_{letter.lower()}"] for letter in LETTERS)
    answer = LETTERS.index(row["answer"])
    digests = [hashlib.sha256(frame).hexdigest()[:16] for frame in frames]
    return EvalQuestion(question_id=row["question_id"], text=row["question"], options=options, answer=answer,
                        dimension=dimension, data_type=row["data_type"], frames=frames,
                        image_id=row.get("data_id") or row["question_id"],
                        content_hash=content_hash(row["question"], options, answer, row["data_type"], digests))


def _dimension_key(type_id: int, fallback: str) -> str:
    try:
        return registry().get(int(type_id)).key
    except (KeyError, ValueError):
        return fallback


def _check_columns(names: Iterable[str], where: str) -> None:
    missing = [c for c in COLUMNS if c not in set(names)]
    if missing:
        raise EvalError(f"{where} is not a benchsmith release: it has no {', '.join(missing)} column(s)")


def from_folder(folder: Path) -> list[EvalQuestion]:
    """Every question of a release folder (its `data/<dimension>/*.parquet` shards)."""
    import pyarrow.parquet as pq

    if not folder.is_dir():
        raise EvalError(f"release folder {folder} does not exist")
    shards = sorted(folder.glob("data/*/*.parquet"))
    if not shards:
        raise EvalError(f"{folder} is not a benchsmith release: no data/<dimension>/*.parquet shards in it")
    questions: list[EvalQuestion] = []
    for shard in shards:
        try:
            table = pq.read_table(shard)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
            raise EvalError(f"cannot read {shard}: {exc}".splitlines()[0]) from None
        _check_columns(table.column_names, str(shard))
        questions += [question_of(row, _dimension_key(row["question_type_id"], shard.parent.name))
                      for row in table.to_pylist()]
    return questions


def from_hub(name: str, config: str = "all", split: str = "test") -> list[EvalQuestion]:
    """Every question of a published dataset on the Hub (or its local cache)."""
    import datasets

    try:
        data = datasets.load_dataset(name, config, split=split)
    except Exception as exc:  # noqa: BLE001 - network, auth and format errors all stop here
        raise EvalError(f"cannot load {name!r} ({config}/{split}) from the Hub: {exc}".splitlines()[0]) from None
    _check_columns(data.column_names, name)
    data = data.cast_column("image", datasets.List(datasets.Image(decode=False)))
    return [question_of(row, _dimension_key(row["question_type_id"], row.get("category", ""))) for row in data]


def from_store(store, media_dir: Path, statuses: Iterable[str] = ("candidate", "in_review", "accepted")) -> list[EvalQuestion]:
    """The store's questions in `statuses` as a model would see them. Their images stay in the media
    folder until a model needs them; each is read once now, a file at a time, for its digest."""
    questions = store.get_questions(status=list(statuses))
    items = {item.id: item for item in store.get_items(sorted({q.item_id for q in questions}))}
    dimensions = registry()
    digests: dict[Path, str] = {}
    out: list[EvalQuestion] = []
    for question in questions:
        item = items.get(question.item_id)
        if item is None:
            continue
        files = tuple(media_dir / path for path in ([item.path] if item.kind == "image" else item.frames))
        for file in files:
            if file not in digests:
                with file.open("rb") as handle:
                    digests[file] = hashlib.file_digest(handle, "sha256").hexdigest()[:16]
        answer = question.final_answer
        options = tuple(question.options)
        out.append(EvalQuestion(
            question_id=question.id, text=question.text, options=options, answer=answer,
            dimension=dimensions.get(question.dimension_id).key, data_type=item.kind, frame_files=files,
            image_id=item.id, content_hash=content_hash(question.text, options, answer, item.kind,
                                                        [digests[f] for f in files])))
    return out


def resolve(*, release: str | None, hub: str | None, candidates: bool, releases_root: Path, store,
            media_dir: Path) -> Source:
    """The source a command line names: a release version or folder, a Hub dataset, or the candidates."""
    if sum(map(bool, (release, hub, candidates))) > 1:
        raise EvalError("name one source: --release, --hub or --candidates")
    if hub:
        return Source(f"hub:{hub}", from_hub(hub))
    if candidates:
        return Source("candidates", from_store(store, media_dir))
    if release is None:
        published = store.get_releases()
        if not published:
            raise EvalError("nothing is published yet: name --release <folder>, --hub org/name or --candidates")
        release = published[-1].version
    folder = Path(release)
    if not folder.is_dir() and (releases_root / release).is_dir():
        return Source(f"release:{release}", from_folder(releases_root / release))
    return Source(f"folder:{folder.resolve()}", from_folder(folder))


# -- conversations (ConvEval) -------------------------------------------------------------------------

def conversation_of(row: dict[str, Any]):
    """A published conversation row as the model under test meets it."""
    from benchsmith.records import LEVELS, Turn
    from evaluation.conveval import EvalConversation

    turns = [Turn(level=row.get(f"level_{n}") or level, task=row.get(f"task_{n}") or "",
                  instruction=row[f"instruction_{n}"], reference=row[f"reference_{n}"],
                  focus_points=list(row.get(f"focus_points_{n}") or []))
             for n, level in enumerate(LEVELS, 1)]
    frames = [image["bytes"] if isinstance(image, dict) else image for image in row["image"] or []]
    return EvalConversation.of(row["conversation_id"], turns, frames)


def conversations_from_folder(folder: Path) -> list:
    import pyarrow.parquet as pq

    if not folder.is_dir():
        raise EvalError(f"release folder {folder} does not exist")
    shards = sorted(folder.glob("conversations/*.parquet"))
    if not shards:
        raise EvalError(f"{folder} has no conversations (no conversations/*.parquet shards in it)")
    return [conversation_of(row) for shard in shards for row in pq.read_table(shard).to_pylist()]


def conversations_from_store(store, media_dir: Path,
                             statuses: Iterable[str] = ("candidate", "in_review", "accepted")) -> list:
    from evaluation.conveval import EvalConversation

    conversations = store.get_conversations(status=list(statuses))
    items = {item.id: item for item in store.get_items(sorted({c.item_id for c in conversations}))}
    out = []
    for conversation in conversations:
        item = items.get(conversation.item_id)
        if item is None:
            continue
        paths = [item.path] if item.kind == "image" else list(item.frames)
        out.append(EvalConversation.of(conversation.id, conversation.final_turns,
                                       [(media_dir / path).read_bytes() for path in paths]))
    return out


def resolve_conversations(*, release: str | None, hub: str | None, candidates: bool, releases_root: Path, store,
                          media_dir: Path) -> tuple[str, list]:
    """(label, conversations) of the source a command line names, as `resolve` does for questions."""
    if sum(map(bool, (release, hub, candidates))) > 1:
        raise EvalError("name one source: --release, --hub or --candidates")
    if hub:
        import datasets

        try:
            data = datasets.load_dataset(hub, "conversations", split="test")
        except Exception as exc:  # noqa: BLE001 - network, auth and format errors all stop here
            raise EvalError(f"cannot load the conversations of {hub!r} from the Hub: {exc}".splitlines()[0]) from None
        data = data.cast_column("image", datasets.List(datasets.Image(decode=False)))
        return f"hub:{hub}", [conversation_of(row) for row in data]
    if candidates:
        return "candidates", conversations_from_store(store, media_dir)
    if release is None:
        published = store.get_releases()
        if not published:
            raise EvalError("nothing is published yet: name --release <folder>, --hub org/name or --candidates")
        release = published[-1].version
    folder = Path(release)
    if not folder.is_dir() and (releases_root / release).is_dir():
        return f"release:{release}", conversations_from_folder(releases_root / release)
    return f"folder:{folder.resolve()}", conversations_from_folder(folder)
