"""COCO object boxes from CenterNet-MobileNetV3, a TF.js graph model run by Node.

The weights (`models/centernet.json` + `.bin`, 4 MB, 80 COCO classes) come in the npm package
`@vladmandic/human`; TF.js runs them on its WebAssembly backend. Both are pinned by
`extractors/centernet_js/package-lock.json` and installed by `make install` (`npm ci` there), so nothing
is fetched at run time. One Node process (`centernet.mjs`) lives as long as the extractor: Python resizes
each image to the model's square input and sends the RGB bytes; Node answers with the graph's own decoded
detections (the 100 strongest heatmap peaks: corners in input pixels, score, class). Here they are
scaled back to the image, thresholded, de-duplicated and named from `data/coco_classes.txt`.

CenterNet often puts the same box out twice under different classes; class-agnostic NMS keeps the
best-scoring one, at an IoU high enough that a rider and a horse both stay.
"""

from __future__ import annotations

import json
import select
import shutil
import subprocess
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from benchsmith.geometry import iou, unit_box
from benchsmith.paths import DATA_DIR
from benchsmith.records import Fact
from benchsmith.settings import UNKEYED
from extractors.base import Backend, BackendParams, ExtractorError, Loaded, class_names

RUNTIME_DIR = Path(__file__).with_name("centernet_js")
MODEL_JSON = Path("node_modules/@vladmandic/human/models/centernet.json")
COCO_CLASSES = DATA_DIR / "coco_classes.txt"
INSTALL_HINT = f"run `make install`, or `npm ci` in {RUNTIME_DIR} (the packages its package-lock.json pins)"


def coco_classes() -> tuple[str, ...]:
    return class_names(COCO_CLASSES, 80)


class CenterNetParams(BackendParams):
    min_score: float = Field(0.3, ge=0, le=1)     # detections scoring lower are dropped
    nms_iou: float = Field(0.7, gt=0, le=1)       # a box overlapping a better one more than this is dropped
    max_boxes: int = Field(20, ge=1, le=100)
    runtime_dir: str = Field("", json_schema_extra=UNKEYED)   # folder of centernet.mjs + node_modules; "": packaged
    node: str = Field("node", json_schema_extra=UNKEYED)      # the Node.js executable
    batch_size: int = Field(8, ge=1, json_schema_extra=UNKEYED)
    # the longest the Node process may take to load the model or to answer for one image (it takes well under
    # a second); past it the process is stopped and a new one serves the next image
    answer_timeout_s: float = Field(120.0, gt=0, json_schema_extra=UNKEYED)


def select_detections(rows: Sequence[Sequence[float]], input_size: int, width: int, height: int,
                      params: CenterNetParams) -> list[tuple[int, float, tuple[float, float, float, float]]]:
    """(class, score, unit xyxy box) of the graph's rows [x1, y1, x2, y2, score, class] in input pixels: score
    threshold, class-agnostic greedy NMS by score, then the cap. The input was the image stretched to a
    square, so unit coordinates are the input's pixels over its side."""
    kept: list[tuple[int, float, tuple[float, float, float, float]]] = []
    for x1, y1, x2, y2, score, label in sorted(rows, key=lambda r: -(r[4] or 0)):
        if label is None or score < params.min_score:  # a NaN class (null in JSON) marks an empty slot
            continue
        box = unit_box(width, height, box_px=(x1 * width / input_size, y1 * height / input_size,
                                              x2 * width / input_size, y2 * height / input_size),
                       model_output=True, ndigits=4)
        if box[2] <= box[0] or box[3] <= box[1]:
            continue
        if all(iou(box, other) <= params.nms_iou for _c, _s, other in kept):
            kept.append((int(label), round(float(score), 4), box))
        if len(kept) == params.max_boxes:
            break
    return kept


class NodeDetector:
    """The running `centernet.mjs`: RGB bytes of the model's input size in, one JSON line of detections out."""

    def __init__(self, node: str, runtime_dir: Path, timeout_s: float = 120.0) -> None:
        self.timeout_s = timeout_s
        self.process = subprocess.Popen([node, str(runtime_dir / "centernet.mjs"), str(runtime_dir / MODEL_JSON)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._stderr: list[str] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        self._finalizer = weakref.finalize(self, _stop, self.process)
        self.size = int(self._answer()["size"])

    def _drain_stderr(self) -> None:
        for line in self.process.stderr:
            self._stderr = (self._stderr + [line.decode(errors="replace").rstrip()])[-20:]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def _answer(self) -> dict:
        ready, _, _ = select.select([self.process.stdout], [], [], self.timeout_s)
        if not ready:
            self.process.kill()
            self.close()
            raise ExtractorError(f"centernet: the Node process gave no answer within {self.timeout_s:g} s and was "
                                 "stopped (extract.extractors.<name>.answer_timeout_s)")
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=10)
            raise ExtractorError(f"centernet: the Node process stopped (exit {self.process.returncode}): "
                                 + " | ".join(self._stderr[-5:]))
        return json.loads(line)

    def detect(self, rgb: bytes) -> list[list[float]]:
        try:
            self.process.stdin.write(rgb)
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # the reason is read below
        return self._answer()["detections"]

    def close(self) -> None:
        self._finalizer()


def _stop(process: subprocess.Popen) -> None:
    if process.stdin and not process.stdin.closed:
        process.stdin.close()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


class CenterNetExtractor(Backend):
    """Object facts (COCO label, unit box, score) from CenterNet-MobileNetV3."""

    Params = CenterNetParams

    @property
    def model_name(self) -> str:
        return "centernet-mobilenetv3-coco"

    @property
    def runtime_dir(self) -> Path:
        return Path(self.params.runtime_dir).expanduser() if self.params.runtime_dir else RUNTIME_DIR

    def check(self) -> None:
        coco_classes()
        if shutil.which(self.params.node) is None:
            raise ExtractorError(f"extractor '{self.name}': Node.js ('{self.params.node}') is not on PATH; install "
                                 "Node 18 or later (`make system-deps`) or set "
                                 f"extract.extractors.{self.name}.node")
        for needed in (self.runtime_dir / "centernet.mjs", self.runtime_dir / MODEL_JSON,
                       self.runtime_dir / "node_modules/@tensorflow/tfjs-backend-wasm"):
            if not needed.exists():
                raise ExtractorError(f"extractor '{self.name}': {needed} is missing; {INSTALL_HINT}")

    def load(self) -> None:
        if getattr(self, "detector", None) is None:
            self.check()
            self.classes = coco_classes()
            self.detector = NodeDetector(self.params.node, self.runtime_dir, self.params.answer_timeout_s)

    def close(self) -> None:
        if getattr(self, "detector", None) is not None:
            self.detector.close()
            self.detector = None

    def detections(self, pixels) -> list[tuple[int, float, tuple[float, float, float, float]]]:
        """(class, score, unit box) for one RGB image."""
        from PIL import Image as PILImage

        if not self.detector.alive:  # stopped after an image it choked on: a new process for the next
            self.close()
            self.load()
        size = self.detector.size
        square = pixels.resize((size, size), PILImage.Resampling.BILINEAR)
        rows = self.detector.detect(square.tobytes())
        return select_detections(rows, size, pixels.width, pixels.height, self.params)

    def extract(self, images: Sequence[Loaded]) -> list[list[Fact]]:
        return [[self.fact(loaded.image, "object", self.classes[label], box=box, score=score)
                 for label, score, box in self.detections(loaded.pixels)] for loaded in images]
