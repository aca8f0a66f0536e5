"""The ingest stage: read each candidate, check it, store accepted images, and record a reason for every
one refused. Then judge caption richness of what came in."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchsmith import runner
from benchsmith.images import Accepted, Rejected, inspect_image
from benchsmith.records import Image, ImageSet, Verdict, sha256_bytes, stable_hash
from benchsmith.settings import IngestSettings
from benchsmith.store import Store
from ingest.annotations import normalise_annotations
from ingest.candidates import Candidate, inside, printable_name, read_regular_file, set_rows
from ingest.sources import candidates_for
from ingest.near_duplicates import HashIndex, perceptual_hash


@dataclass
class IngestReport:
    seen: int = 0
    skipped: int = 0     # examined by an earlier run under the same settings and not changed since: not read
    added: int = 0
    unchanged: int = 0   # read, and already in the store
    annotated: int = 0   # task annotations added to an image that came earlier (rows sharing one image)
    rejected: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)  # supplied boxes not kept, by kind and rule ("object no_area")
    sets: int = 0        # image sets added

    def summary(self) -> str:
        counts = [(self.unchanged or not self.skipped, f"{self.unchanged} already in the store"),
                  (self.skipped, f"{self.skipped} unchanged since the last ingest (not read again)"),
                  (self.sets, f"{self.sets} image sets added"),
                  (self.annotated, f"{self.annotated} task annotations added to images seen before"),
                  (self.rejected, f"{sum(self.rejected.values())} refused (" +
                   ", ".join(f"{n} {rule}" for rule, n in sorted(self.rejected.items())) + ")"),
                  (self.dropped, f"{sum(self.dropped.values())} supplied boxes dropped (" +
                   ", ".join(f"{n} {kind}" for kind, n in sorted(self.dropped.items()))
                   + "; each with its reason under its image's annotations.dropped)")]
        return ", ".join([f"{self.seen} seen", f"{self.added} added", *(text for shown, text in counts if shown)])


def _die_with_parent(parent: int) -> None:
    """Worker initializer: end this worker when the ingest process dies, even by SIGKILL (Linux), instead of
    living on as an orphan holding memory."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pool's own broken-pipe handling is all there is
        pass
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)


def _inspect(args: tuple[bytes, int, int]) -> Accepted | Rejected:
    data, min_side, max_pixels = args
    result = inspect_image(data, min_side=min_side, max_pixels=max_pixels)
    return replace(result, phash=perceptual_hash(result.data)) if isinstance(result, Accepted) else result


def _write_atomic(path: Path, data: bytes) -> None:
    if path.exists() and path.stat().st_size == len(data):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class IngestStage(runner.Stage):
    """The candidates of one source as a runner stage: ledger stage `ingest`, config key = the checks'
    limits, subject = the source label, the candidate's name and its version. A file examined once is not
    read again until it changes (or the limits do); an accepted image's id is the sha256 of its bytes, so
    re-reading adds nothing twice."""

    name = "ingest"

    def __init__(self, media_dir: Path, candidates: Iterable[Candidate], settings: IngestSettings, *, label: str,
                 workers: int = 1) -> None:
        self.media_dir, self.candidates, self.settings = media_dir, list(candidates), settings
        self.label = printable_name(label)
        self.processes = workers
        self.pool: ProcessPoolExecutor | None = None
        self.report = IngestReport(seen=len(self.candidates))
        self.pictures: HashIndex | None = None  # every stored image's perceptual hash, read at the first commit

    def __enter__(self) -> "IngestStage":
        return self

    def __exit__(self, *exc) -> None:
        if self.pool:
            self.pool.shutdown()
            self.pool = None

    def config_key(self) -> str:
        s = self.settings
        return runner.config_key(s.min_side, s.max_pixels, s.max_bytes, s.near_duplicates.model_dump())

    def units(self, context: runner.StageContext) -> list[Candidate]:
        return self.candidates

    def subject(self, candidate: Candidate) -> str:
        return stable_hash(self.label, printable_name(candidate.name), candidate.version, length=32)

    def windows(self) -> tuple[int, int | None]:
        return self.settings.batch_size, None

    def prepare(self, context: runner.StageContext, batch: Sequence[Candidate]) -> None:
        if self.processes > 1 and self.pool is None:
            self.pool = ProcessPoolExecutor(self.processes, initializer=_die_with_parent, initargs=(os.getpid(),))

    def process(self, batch: Sequence[Candidate],
                context: runner.StageContext) -> Iterator[tuple[Candidate, Accepted | Rejected]]:
        """Read and check each candidate (in `processes` worker processes when more than one)."""
        to_inspect: list[tuple[Candidate, bytes]] = []
        for candidate in batch:
            if printable_name(candidate.name) != candidate.name:  # the store keeps names as UTF-8 text
                yield candidate, Rejected("bad_name", f"the file name {printable_name(candidate.name)} is not valid "
                                                      "UTF-8; rename it (e.g. convmv -f latin1 -t utf8)")
                continue
            if candidate.refused:
                yield candidate, candidate.refused
                continue
            try:
                data = candidate.read(self.settings.max_bytes)
            except IsADirectoryError:
                data = Rejected("not_a_file", "is a directory")
            except PermissionError:
                data = Rejected("unreadable", "permission denied")
            except OSError as exc:
                data = Rejected("unreadable", f"cannot be read: {exc.strerror or exc}")
            if isinstance(data, Rejected):
                yield candidate, data
            else:
                to_inspect.append((candidate, data))
        s = self.settings
        args = [(data, s.min_side, s.max_pixels) for _, data in to_inspect]
        results = self.pool.map(_inspect, args, chunksize=16) if self.pool else map(_inspect, args)
        for (candidate, _), result in zip(to_inspect, results):
            yield candidate, result

    def commit(self, context: runner.StageContext, pairs: list[tuple[Candidate, Accepted | Rejected]],
               stage_report: runner.StageReport) -> list[runner.Outcome]:
        """Store the accepted images (media file, item) and a verdict for each refused candidate."""
        store, report = context.store, self.report
        if self.pictures is None:
            self.pictures, taken = HashIndex.of(store.image_hashes(), self.media_dir)
            if taken:
                store.set_image_hashes(taken)
        accepted_ids = sorted({o.id for _, o in pairs if isinstance(o, Accepted)})
        stored_names = ({i.id: i.original_name for i in store.get_items(accepted_ids, status=None)}
                        if accepted_ids else {})
        new_items: dict[str, Image] = {}  # duplicates within this group; earlier groups are in the store
        verdicts: list[Verdict] = []
        outcomes: list[runner.Outcome] = []
        more_records: dict[str, list[dict]] = {}   # stored image id -> task annotations of later rows
        for candidate, outcome in pairs:
            subject, name = self.subject(candidate), printable_name(candidate.name)
            original: dict = {}
            records = candidate.annotations.get("reform") or []
            earlier = new_items.get(outcome.id) if isinstance(outcome, Accepted) else None
            seen = earlier is not None or (isinstance(outcome, Accepted) and outcome.id in stored_names)
            if seen and records:
                # another annotation of an image already here (VQA: several questions per image): add it there
                target = earlier.annotations.setdefault("reform", []) if earlier else more_records.setdefault(outcome.id, [])
                fresh = [r for r in records if r not in target]
                target.extend(fresh)
                if earlier:  # the store counts what it adds to stored images
                    report.annotated += len(fresh)
                else:
                    report.unchanged += 1
            elif seen and (first_name := earlier.original_name if earlier else stored_names[outcome.id]) != name:
                outcome = Rejected("duplicate", f"same bytes as {first_name}", outcome.id)
            elif seen:
                report.unchanged += 1
            elif isinstance(outcome, Accepted):
                try:
                    annotations = normalise_annotations(candidate.annotations, outcome.width, outcome.height)
                except ValueError as exc:
                    outcome = Rejected("bad_annotations", str(exc))
                else:
                    same = self.pictures.same_picture(
                        outcome.data, outcome.phash, self.settings.near_duplicates,
                        apart=lambda item_id: told_apart(annotations, new_items, store, item_id))
                    if same is not None:
                        outcome = Rejected("near_duplicate", f"the same picture as {same.name} (item {same.item_id}):"
                                           f" perceptual-hash distance {same.distance}, detail {same.detail} "
                                           "(ingest.near_duplicates)", outcome.id)
                        original = {"original": same.item_id, "distance": same.distance, "detail": same.detail}
            if isinstance(outcome, Rejected):
                report.rejected[outcome.rule] += 1
                verdicts.append(Verdict(subject_id=f"{self.label}:{name}", subject_kind="input", stage="ingest",
                                        rule=outcome.rule, passed=False, reason=outcome.reason,
                                        details=({"sha256": outcome.id} if outcome.id else {}) | original))
                outcomes.append(runner.Outcome(subject, "failed", outcome.rule, {"name": name}))
                continue
            if not seen:
                report.dropped.update(f"{d['kind']} {d['rule']}" for d in annotations.get("dropped", []))
                relative = f"{outcome.id[:2]}/{outcome.id}{outcome.extension}"
                _write_atomic(self.media_dir / relative, outcome.data)
                new_items[outcome.id] = Image(id=outcome.id, path=relative, width=outcome.width, height=outcome.height,
                                              source=candidate.source, license=candidate.license, original_name=name,
                                              annotations=annotations, phash=outcome.phash)
                self.pictures.add(outcome.id, name, relative, outcome.phash)
            outcomes.append(runner.Outcome(subject, "done", details={"name": name, "item": outcome.id}))
        report.added += store.add_items(list(new_items.values()))
        if more_records:
            report.annotated += store.add_item_annotations("reform", more_records)
        if verdicts:
            store.add_verdicts(verdicts)
        return outcomes


def told_apart(annotations: dict, new_items: dict[str, Image], store: Store, item_id: str) -> bool:
    """Whether a drawn picture's truth says it is not stored image `item_id`: both carry the truth they
    were drawn from (oracle scenes, text-rich pages) and it differs in what or where things are (a set of
    pictures that differ in one detail, pages of one template). A copy comes with its original's truth."""
    if "truth" not in annotations:
        return False
    stored = new_items[item_id] if item_id in new_items else next(iter(store.get_items([item_id], status=None)), None)
    if stored is None or "truth" not in stored.annotations:
        return False
    return any(annotations.get(key) != stored.annotations.get(key) for key in ("truth", "objects"))


def ingest(store: Store, media_dir: Path, candidates: Iterable[Candidate], settings: IngestSettings, *,
           label: str, workers: int = 1) -> IngestReport:
    """Check, normalise and store every candidate not examined before; refuse bad ones with a verdict each.

    `label` names the source: it prefixes the names in refusal verdicts, so they can be traced back to it,
    and keeps its ledger subjects apart from other sources'. Work is committed in batches of
    `settings.batch_size`: a crash loses at most the batch in flight, and a rerun reads only what is new
    or changed.
    """
    with IngestStage(media_dir, candidates, settings, label=label, workers=workers) as stage:
        todo = runner.pending(stage, store)
        stage.report.skipped = stage.report.seen - len(todo)
        runner.run(stage, store, units=todo)
    return stage.report


def ingest_sets(store: Store, manifest: Path, settings: IngestSettings, report: IngestReport) -> None:
    """Store the image sets a JSONL manifest lists (rows with `images`, paths relative to the manifest's
    folder, in the order questions number them; optional `truth`, `source`, `license`), each made of its
    images as stored: an image's id is the sha256 of its file's bytes. A set with an image outside the
    folder, or not stored (refused, or never listed), is refused with a verdict; a stored set adds nothing."""
    root, sets, verdicts, listed = manifest.parent.resolve(), [], [], []
    for number, row in set_rows(manifest):
        names = [str(name) for name in row["images"]] if isinstance(row["images"], list) else []
        read = [read_regular_file(root / name, settings.max_bytes) if inside(root, root / name) else None
                for name in names]
        ids = [None if data is None else sha256_bytes(data) if isinstance(data, bytes) else "" for data in read]
        listed.append((number, row, names, ids))  # ids, not the bytes: a manifest's sets are not held in memory
    wanted = sorted({i for *_, ids in listed for i in ids if i})
    stored = {i.id: i for i in store.get_items(wanted, kind="image")} if wanted else {}  # one query for every set
    for number, row, names, ids in listed:
        if escaping := [name for name, i in zip(names, ids) if i is None]:
            refused = Rejected("escapes_root", f"image {escaping[0]} leaves the manifest's folder {root}")
        elif missing := [name for name, i in zip(names, ids) if i not in stored]:
            refused = Rejected("set_image_missing", f"image {missing[0]} is not a stored image (refused, or not "
                                                    "listed in the manifest)")
        else:
            try:
                sets.append(ImageSet.of([stored[i] for i in ids], source=str(row.get("source") or manifest.stem),
                                        license=str(row.get("license") or ""),
                                        original_name=f"{manifest.name}:{number}",
                                        annotations={"truth": row.get("truth") or {}}))
                continue
            except ValueError as exc:
                refused = Rejected("bad_set", str(exc))
        report.rejected[refused.rule] += 1
        verdicts.append(Verdict(subject_id=f"{manifest}:{number}", subject_kind="input", stage="ingest",
                                rule=refused.rule, passed=False, reason=refused.reason))
    report.sets += store.add_items(sets)
    if verdicts:
        store.add_verdicts(verdicts)


def ingest_sources(store: Store, settings, locations: list[Path], *, workers: int = 1,
                   **listing) -> list[tuple[Path, IngestReport]]:
    """Ingest each folder, manifest or dataset (`listing`: `candidates_for`'s source, license, image_column,
    task) and the image sets a manifest lists, then judge caption richness of what came in."""
    from ingest import richness

    reports = [(Path(location), ingest(store, settings.media_dir, candidates_for(Path(location), **listing),
                                       settings.ingest, label=str(location), workers=workers))
               for location in locations]
    for location, report in reports:
        ingest_sets(store, location, settings.ingest, report)
    richness.apply(store, settings.ingest.richness)
    return reports
