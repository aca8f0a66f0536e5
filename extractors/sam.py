"""Instance boxes from SAM, labelled and described by CLIP, optionally captioned region by region.

Two mask sources, one treatment of their masks:
- `sam`: segment-anything's `SamAutomaticMaskGenerator`, with `checkpoint` and `model_type` from the
  settings (segment-anything needs a working torchvision);
- `sam_transformers`: transformers' `SamModel` prompted with a grid of points (no torchvision).
Each mask becomes a unit xyxy box; boxes are filtered by area and score, de-duplicated by NMS and capped
per image. Each box crop then gets a label from the `labeller` (CLIP over the object vocabulary),
attributes by zero-shot scoring over `data/vocabularies/attributes.yaml` (what VinVL did for SEED-Bench),
and, when `region_captioner` names a captioning model, a region caption (what GRiT did).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from benchsmith.geometry import iou, unit_box
from benchsmith.models import pick_device
from benchsmith.records import Fact, stable_hash
from benchsmith.settings import UNKEYED
from extractors.base import Backend, BackendParams, ExtractorError, Loaded, load_pretrained, require_model
from extractors.captions import Captioner
from extractors.tags import ClipScorer, load_attributes, load_vocabulary

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Instance:
    box: tuple[int, int, int, int]   # pixel xyxy, exclusive right/bottom
    score: float


class SamParams(BackendParams):
    points_per_side: int = Field(32, ge=1)
    pred_iou_thresh: float = Field(0.88, ge=0, le=1)    # masks the model itself scores lower are dropped
    min_area: float = Field(0.003, ge=0, le=1)          # box area as a share of the image
    max_area: float = Field(0.9, ge=0, le=1)
    nms_iou: float = Field(0.6, gt=0, le=1)
    max_boxes: int = Field(20, ge=1)
    labeller: str                                       # CLIP-class model id or folder
    vocabulary: str = "objects"
    attributes: str = "attributes"                      # data/vocabularies/attributes.yaml, or a path
    attribute_min_score: float = Field(0.3, ge=0, le=1)
    region_captioner: str = ""                          # captioning model for crops; empty: no region facts
    crop_margin: float = Field(0.05, ge=0, le=1)        # context kept around a box when cropping
    batch_size: int = Field(1, ge=1, json_schema_extra=UNKEYED)


def mask_box(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """Pixel xyxy extent of a boolean mask (right and bottom exclusive), or None when it is empty."""
    import numpy as np

    rows, cols = np.any(mask, axis=1), np.any(mask, axis=0)
    if not rows.any():
        return None
    y1, y2 = np.flatnonzero(rows)[[0, -1]]
    x1, x2 = np.flatnonzero(cols)[[0, -1]]
    return int(x1), int(y1), int(x2) + 1, int(y2) + 1


def select_instances(instances: Sequence[Instance], width: int, height: int, params: SamParams) -> list[Instance]:
    """Area and score filter, then greedy NMS by score, then the per-image cap."""
    area = float(width * height)
    kept: list[Instance] = []
    for candidate in sorted(instances, key=lambda i: (-i.score, i.box)):
        share = (candidate.box[2] - candidate.box[0]) * (candidate.box[3] - candidate.box[1]) / area
        if candidate.score < params.pred_iou_thresh or not params.min_area <= share <= params.max_area:
            continue
        if all(iou(candidate.box, other.box) <= params.nms_iou for other in kept):
            kept.append(candidate)
        if len(kept) == params.max_boxes:
            break
    return kept


class _SamBackend(Backend):
    """Box selection, labels, attributes and region captions shared by both mask sources."""

    Params = SamParams
    uses_gpu = True

    @property
    def identity(self) -> dict:
        return super().identity | {"vocabulary_hash": stable_hash(load_vocabulary(self.params.vocabulary),
                                                                  load_attributes(self.params.attributes), length=8)}

    def _load_describers(self) -> None:
        p = self.params
        self.labels = load_vocabulary(p.vocabulary)
        self.attribute_values = load_attributes(p.attributes)
        self.scorer = ClipScorer(p.labeller, self.name, self.settings, device=p.device, field="labeller")
        self.captioner = Captioner(p.region_captioner, self.name, self.settings, device=p.device,
                                   field="region_captioner") if p.region_captioner else None

    def check(self) -> None:
        p = self.params
        load_vocabulary(p.vocabulary)
        load_attributes(p.attributes)
        super().check()
        require_model(p.labeller, self.name, "labeller")
        if p.region_captioner:
            require_model(p.region_captioner, self.name, "region_captioner")

    def _instances(self, loaded: Loaded) -> list[Instance]:
        raise NotImplementedError

    def extract(self, images: Sequence[Loaded]) -> list[list[Fact]]:
        return [self._describe(loaded, self._instances(loaded)) for loaded in images]

    def _crop(self, pixels, box: tuple[int, int, int, int]):
        width, height = pixels.size
        mx, my = (box[2] - box[0]) * self.params.crop_margin, (box[3] - box[1]) * self.params.crop_margin
        return pixels.crop((max(0, int(box[0] - mx)), max(0, int(box[1] - my)),
                            min(width, int(box[2] + mx)), min(height, int(box[3] + my))))

    def _describe(self, loaded: Loaded, instances: list[Instance]) -> list[Fact]:
        width, height = loaded.pixels.size
        kept = select_instances(instances, width, height, self.params)
        if not kept:
            return []
        crops = [self._crop(loaded.pixels, instance.box) for instance in kept]
        embeddings = self.scorer.image_embeddings(crops)
        labelled = self.scorer.label(embeddings, self.labels)
        attributes = self.scorer.attributes(embeddings, [label for label, _ in labelled], self.attribute_values,
                                            self.params.attribute_min_score)
        boxes = [unit_box(width, height, box_px=instance.box, model_output=True, ndigits=5) for instance in kept]
        facts = [self.fact(loaded.image, "object", label, box=box, score=round(instance.score, 4), attributes=described)
                 for instance, box, (label, _p), described in zip(kept, boxes, labelled, attributes)]
        if self.captioner is not None:
            facts += [self.fact(loaded.image, "region", text, box=box)
                      for box, text in zip(boxes, self.captioner(crops)) if text]
        return facts


class SegmentAnythingParams(SamParams):
    checkpoint: str                       # e.g. sam_vit_h_4b8939.pth
    model_type: str = "vit_h"             # a key of segment_anything.sam_model_registry
    stability_score_thresh: float = Field(0.92, ge=0, le=1)
    points_per_batch: int = Field(64, ge=1)


class SegmentAnythingExtractor(_SamBackend):
    Params = SegmentAnythingParams

    def _segment_anything(self):
        try:
            import segment_anything
        except (ImportError, RuntimeError) as exc:  # torchvision missing, or a CPU-less CUDA build of it
            raise ExtractorError(
                f"extractor '{self.name}': segment-anything cannot be imported because torchvision is missing or "
                f"broken ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); install the "
                "torchvision build that matches your torch (pip install -e '.[sam]' on a CUDA machine), "
                "or use backend: sam_transformers, which needs no torchvision") from None
        p = self.params
        if p.model_type not in segment_anything.sam_model_registry:
            raise ExtractorError(f"extractor '{self.name}': model_type '{p.model_type}' is not one of "
                                 f"{', '.join(sorted(segment_anything.sam_model_registry))}")
        checkpoint = Path(p.checkpoint).expanduser()
        if not p.checkpoint or not checkpoint.is_file():
            raise ExtractorError(
                f"extractor '{self.name}': the SAM {p.model_type} checkpoint is not available "
                f"({p.checkpoint or 'no path set'}); download it (e.g. sam_vit_h_4b8939.pth from the "
                f"segment-anything release) and set extract.extractors.{self.name}.checkpoint to its path")
        return segment_anything, checkpoint

    def check(self) -> None:
        self._segment_anything()
        super().check()

    def load(self) -> None:
        segment_anything, checkpoint = self._segment_anything()
        p = self.params
        device = pick_device(p.device)
        sam = segment_anything.sam_model_registry[p.model_type](checkpoint=str(checkpoint)).to(device).eval()
        self.generator = segment_anything.SamAutomaticMaskGenerator(
            sam, points_per_side=p.points_per_side, points_per_batch=p.points_per_batch,
            pred_iou_thresh=p.pred_iou_thresh, stability_score_thresh=p.stability_score_thresh,
            box_nms_thresh=p.nms_iou, output_mode="binary_mask")
        self._load_describers()

    @property
    def model_name(self) -> str:
        return f"sam-{self.params.model_type}"

    def _instances(self, loaded: Loaded) -> list[Instance]:
        import numpy as np

        return [Instance(box, float(record["predicted_iou"]))
                for record in self.generator.generate(np.asarray(loaded.pixels))
                for box in [mask_box(record["segmentation"])] if box is not None]


class TransformersSamParams(SamParams):
    model: str                            # e.g. facebook/sam-vit-huge
    points_per_batch: int = Field(64, ge=1)


class TransformersSamExtractor(_SamBackend):
    Params = TransformersSamParams

    def load(self) -> None:
        self.processor, self.model, self.device, self.dtype = load_pretrained(
            "SamModel", self.params.model, self.name, self.settings, device=self.params.device,
            processor_class="SamProcessor")
        self._load_describers()

    def _instances(self, loaded: Loaded) -> list[Instance]:
        import numpy as np
        import torch

        width, height = loaded.pixels.size
        n = self.params.points_per_side
        offsets = (np.arange(n) + 0.5) / n
        grid = [[[float(x * width), float(y * height)]] for y in offsets for x in offsets]
        # one pass of the processor: the image for the encoder, every grid point scaled to its input size
        inputs = self.processor(images=loaded.pixels, input_points=[grid], return_tensors="pt")
        with torch.inference_mode():
            embeddings = self.model.get_image_embeddings(inputs["pixel_values"].to(self.device, self.dtype))
        found = []
        for start in range(0, len(grid), self.params.points_per_batch):
            points = inputs["input_points"][:, start:start + self.params.points_per_batch]
            with torch.inference_mode():
                out = self.model(image_embeddings=embeddings, multimask_output=True,
                                 input_points=points.to(self.device, self.dtype))
            scores = out.iou_scores[0].float()                     # [points, 3]
            best = scores.argmax(dim=-1)
            masks = self.processor.post_process_masks(out.pred_masks.float().cpu(), inputs["original_sizes"],
                                                      inputs["reshaped_input_sizes"])[0]  # [points, 3, H, W]
            found += [Instance(box, float(scores[index, choice])) for index, choice in enumerate(best.tolist())
                      for box in [mask_box(masks[index, choice].numpy())] if box is not None]
        return found
