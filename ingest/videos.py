"""Videos: the annotation manifest, ingest with uniform frame sampling, and a synthetic test set.

The manifest is JSONL, one video a line:

    {"path": "clips/cook.mp4",                       # relative to the manifest's folder
     "segments": [{"start": 0.0, "end": 2.5, "label": "crack an egg"}, ...],   # seconds, any order
     "steps": ["crack an egg", "whisk", "fry"],      # optional: the procedure's ordered steps
     "source": "...", "license": "..."}              # optional

Each video becomes a `Video` item: the file is copied under `<media>/videos/`, `frames` (8 by default)
are sampled uniformly and saved as PNGs under `<media>/frames/<video id>/` so review and publishing can
show them, and `annotations` holds the segments sorted by start, the steps and each frame's time.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from pydantic import Field, ValidationError, model_validator

from benchsmith import runner
from benchsmith.errors import BenchsmithError
from benchsmith.images import Rejected
from benchsmith.records import Verdict, Video, stable_hash
from benchsmith.settings import Strict
from ingest.candidates import file_problem, file_version, inside
from ingest.stage import IngestReport

STAGE = "ingest"


class VideoError(BenchsmithError, ValueError):
    """A video manifest that cannot be read at all."""


class Segment(Strict):
    start: float = Field(ge=0)
    end: float
    label: str = Field(min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> Segment:
        if self.end <= self.start:
            raise ValueError(f"segment {self.label!r} ends ({self.end}) before it starts ({self.start})")
        return self


class VideoRow(Strict):
    path: str
    segments: list[Segment] = Field(min_length=1)
    steps: list[str] | None = None
    source: str = ""
    license: str = ""


def probe(path: Path) -> tuple[float, int, int, int]:
    """The video's frame rate, frame count, width and height."""
    capture = cv2.VideoCapture(str(path))
    try:
        if not capture.isOpened():
            raise ValueError("not a video this machine can decode")
        fps, n_frames = capture.get(cv2.CAP_PROP_FPS) or 0.0, int(capture.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        size = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
    finally:
        capture.release()
    if n_frames <= 0 or fps <= 0:
        raise ValueError("the video has no frames or no frame rate")
    return fps, n_frames, *size


def frame_indices(n_frames: int, count: int) -> list[int]:
    """`count` frame numbers spread evenly over the video, each at the middle of its share."""
    count = min(count, n_frames)
    return [min(n_frames - 1, int((i + 0.5) * n_frames / count)) for i in range(count)]


def sample_frames(path: Path, count: int, out_dir: Path, fps: float, n_frames: int) -> list[tuple[Path, float]]:
    """Save `count` uniformly spaced frames as PNGs; return each file with its time in seconds."""
    out_dir.mkdir(parents=True, exist_ok=True)
    capture = cv2.VideoCapture(str(path))
    saved = []
    try:
        for rank, index in enumerate(frame_indices(n_frames, count)):
            capture.set(cv2.CAP_PROP_POS_FRAMES, index)
            ok, frame = capture.read()
            if not ok:
                raise ValueError(f"frame {index} cannot be decoded")
            target = out_dir / f"frame_{rank:02d}.png"
            cv2.imwrite(str(target), frame)
            saved.append((target, round(index / fps, 3)))
    finally:
        capture.release()
    return saved


@dataclass(frozen=True)
class VideoLine:
    number: int
    text: str
    version: str   # the line itself and its file's size and times


class VideoStage(runner.Stage):
    """The rows of one video manifest as a runner stage (ledger stage `ingest`, subject = the manifest, the
    row number and its version), so a rerun probes, hashes and samples only new or changed rows."""

    name = STAGE

    def __init__(self, media_dir: Path, manifest: Path, frames: int) -> None:
        self.media_dir, self.manifest, self.frames = media_dir, manifest, frames
        self.lines = [VideoLine(number, text, _line_version(manifest, text))
                      for number, text in enumerate(manifest.read_text(encoding="utf-8").splitlines(), start=1)
                      if text.strip()]
        self.report = IngestReport(seen=len(self.lines))

    def config_key(self) -> str:
        return runner.config_key("videos", self.frames)

    def units(self, context: runner.StageContext) -> list[VideoLine]:
        return self.lines

    def subject(self, line: VideoLine) -> str:
        return stable_hash(str(self.manifest), line.number, line.version, length=32)

    def windows(self) -> tuple[int, int | None]:
        return 1, None

    def process(self, lines: Sequence[VideoLine],
                context: runner.StageContext) -> Iterator[tuple[VideoLine, Video | Rejected | None]]:
        for line in lines:
            yield line, self._one(line, context.store)

    def _one(self, line: VideoLine, store) -> Video | Rejected | None:
        """The row's new video, why it is refused, or None when the store has it already."""
        number = line.number
        try:
            row = VideoRow.model_validate(json.loads(line.text))
        except json.JSONDecodeError as exc:
            return Rejected("bad_row", f"row {number}: not JSON: {exc.msg}")
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'row'}: {e['msg']}" for e in exc.errors())
            return Rejected("bad_row", f"row {number}: {problems}")
        source = self.manifest.parent / row.path
        if not inside(self.manifest.parent, source):
            return Rejected("path_outside_root", f"row {number}: {row.path!r} leaves the manifest's folder")
        if problem := file_problem(source):  # before any open: a FIFO would block, a link loop would raise
            if problem.rule == "missing":
                return Rejected("missing_file", f"row {number}: {row.path} not found")
            return Rejected(problem.rule, f"row {number}: {row.path} {problem.reason}")
        try:
            fps, n_frames, width, height = probe(source)
        except ValueError as exc:
            return Rejected("bad_video", f"row {number}: {exc}")
        with source.open("rb") as handle:  # streamed: a video can be larger than memory
            video_id = hashlib.file_digest(handle, "sha256").hexdigest()
        if store.known_item_ids([video_id]):
            return None
        stored = Path("videos") / f"{video_id}{source.suffix.lower()}"
        (self.media_dir / stored).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, self.media_dir / stored)
        try:
            sampled = sample_frames(source, self.frames, self.media_dir / "frames" / video_id, fps, n_frames)
        except ValueError as exc:
            return Rejected("bad_video", f"row {number}: {exc}")
        segments = sorted(row.segments, key=lambda s: (s.start, s.end))
        return Video(
            id=video_id, path=str(stored), width=width, height=height, fps=fps,
            n_frames=n_frames, frames=[str(p.relative_to(self.media_dir)) for p, _t in sampled],
            source=row.source, license=row.license, original_name=source.name,
            annotations={"segments": [s.model_dump() for s in segments], "steps": row.steps,
                         "frame_times": [t for _p, t in sampled], "duration": round(n_frames / fps, 3)})

    def commit(self, context: runner.StageContext, pairs: list[tuple[VideoLine, Video | Rejected | None]],
               stage_report: runner.StageReport) -> list[runner.Outcome]:
        store = context.store
        refusals, outcomes = [], []
        for line, outcome in pairs:
            subject = self.subject(line)
            if isinstance(outcome, Rejected):
                self.report.rejected[outcome.rule] += 1
                refusals.append(Verdict(subject_id=f"{self.manifest}:{line.number}", subject_kind="input",
                                        stage=STAGE, rule=outcome.rule, passed=False, reason=outcome.reason))
                outcomes.append(runner.Outcome(subject, "failed", outcome.rule))
                continue
            if outcome is None:
                self.report.unchanged += 1
            else:
                self.report.added += store.add_items([outcome])
            outcomes.append(runner.Outcome(subject, "done"))
        if refusals:
            store.add_verdicts(refusals)
        return outcomes


def _line_version(manifest: Path, text: str) -> str:
    """The line itself and, if it is a JSON object that names a `path` (the full check comes later), that
    file's size and times."""
    try:
        row = json.loads(text)
    except json.JSONDecodeError:
        row = None
    path = row.get("path") if isinstance(row, dict) else None
    return stable_hash(text, file_version(manifest.parent / path) if isinstance(path, str) and path else "")


def ingest_videos(store, media_dir: Path, manifest: Path, frames: int = 8, progress=None) -> IngestReport:
    """Add the manifest's videos to the store; refused rows get an input verdict with the reason. A rerun
    looks only at rows that are new or whose line or file changed."""
    if not manifest.is_file():
        raise VideoError(f"video manifest not found: {manifest}")
    stage = VideoStage(media_dir, manifest, frames)
    ran = runner.run(stage, store, progress=progress)
    stage.report.skipped = stage.report.seen - ran.pending
    return stage.report


# -- a tiny synthetic set: one shape per clip doing known actions in turn ----------------------------

SHAPE_COLOURS = {"red": (40, 40, 220), "green": (60, 160, 40), "blue": (220, 80, 40), "yellow": (40, 210, 240)}
MOVES = {"moves right": (1, 0), "moves left": (-1, 0), "moves up": (0, -1), "moves down": (0, 1),
         "grows": (0, 0), "shrinks": (0, 0)}


def make_moving_shapes(out_dir: Path, n: int, seed: int = 0, *, fps: int = 10, size: int = 96,
                       segment_seconds: float = 1.0) -> Path:
    """Write n short clips (3-4 actions each) and their manifest.jsonl; return the manifest path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = out_dir / "manifest.jsonl"
    per_segment = int(fps * segment_seconds)
    with manifest.open("w", encoding="utf-8") as handle:
        for index in range(n):
            rng = random.Random(f"{seed}:{index}")
            colour = rng.choice(list(SHAPE_COLOURS))
            shape = rng.choice(("circle", "square"))
            actions = rng.sample(list(MOVES), rng.choice((3, 4)))
            name = f"clip_{seed}_{index:03d}.avi"
            writer = cv2.VideoWriter(str(out_dir / name), cv2.VideoWriter_fourcc(*"MJPG"), fps, (size, size))
            x, y, radius = size / 2, size / 2, size / 8
            segments = []
            for k, action in enumerate(actions):
                dx, dy = MOVES[action]
                for _ in range(per_segment):
                    x = min(max(x + dx * size / 40, radius), size - radius)
                    y = min(max(y + dy * size / 40, radius), size - radius)
                    if action in ("grows", "shrinks"):
                        radius = min(max(radius * (1.06 if action == "grows" else 0.94), 4), size / 4)
                    frame = np.full((size, size, 3), 235, dtype=np.uint8)
                    centre, r = (int(x), int(y)), int(radius)
                    if shape == "circle":
                        cv2.circle(frame, centre, r, SHAPE_COLOURS[colour], -1)
                    else:
                        cv2.rectangle(frame, (centre[0] - r, centre[1] - r), (centre[0] + r, centre[1] + r),
                                      SHAPE_COLOURS[colour], -1)
                    writer.write(frame)
                segments.append({"start": k * segment_seconds, "end": (k + 1) * segment_seconds,
                                 "label": f"the {colour} {shape} {action}"})
            writer.release()
            row = {"path": name, "segments": segments, "steps": [s["label"] for s in segments],
                   "source": "benchsmith-synthetic", "license": "CC0-1.0"}
            handle.write(json.dumps(row) + "\n")
    return manifest

