"""Boxes (x1, y1, x2, y2): reading a supplied box into unit coordinates, and how much two boxes overlap."""

from __future__ import annotations

from collections.abc import Sequence

Box = tuple[float, float, float, float]


class OutsideImage(ValueError):
    """A box that covers no part of the image once clipped to it."""


def unit_box(width: int, height: int, *, box: Sequence[float] | None = None, box_px: Sequence[float] | None = None,
             bbox: Sequence[float] | None = None, model_output: bool = False, ndigits: int | None = None) -> Box | None:
    """The first given of `box` (unit xyxy), `box_px` (pixel xyxy) or `bbox` (COCO pixel xywh) in unit xyxy,
    clipped to [0, 1] and rounded to `ndigits`; None when none is given. Raises ValueError for a unit box
    outside [0, 1], swapped corners or values that are not numbers, and OutsideImage for a box with no area
    inside the image. A detector's `model_output` is taken as it comes: corners put in order and an empty box
    kept, since one odd box must not fail a whole batch."""
    if box is not None:
        x1, y1, x2, y2 = map(float, box)
        if not all(-1e-6 <= v <= 1 + 1e-6 for v in (x1, y1, x2, y2)):
            raise ValueError(f"box {list(box)} is not normalised to [0, 1]; use box_px for pixels")
    elif box_px is not None:
        x1, y1, x2, y2 = (float(v) / s for v, s in zip(box_px, (width, height, width, height)))
    elif bbox is not None:
        x, y, w, h = map(float, bbox)
        x1, y1, x2, y2 = x / width, y / height, (x + w) / width, (y + h) / height
    else:
        return None
    x1, y1, x2, y2 = (min(max(v, 0.0), 1.0) for v in (x1, y1, x2, y2))
    if ndigits is not None:
        x1, y1, x2, y2 = (round(v, ndigits) for v in (x1, y1, x2, y2))
    if model_output:
        return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)
    if x2 < x1 or y2 < y1:
        raise ValueError(f"box has x2<x1 or y2<y1: {[x1, y1, x2, y2]}")
    if x2 == x1 or y2 == y1:
        given = next(b for b in (box, box_px, bbox) if b is not None)
        raise OutsideImage(f"box {list(given)} has no area inside the {width}x{height} image")
    return x1, y1, x2, y2


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two xyxy boxes (unit or pixel, the same for both)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
