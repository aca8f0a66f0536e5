"""Checking and normalising one image file: the pure part of ingestion.

`inspect_image` never raises for a bad file. It returns either an accepted image with the bytes to
store, or a rejection with a reason code and a sentence a maintainer can act on.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

from PIL import Image as PILImage
from PIL import ImageOps, UnidentifiedImageError

from benchsmith.records import sha256_bytes


SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"GIF8", "GIF"),
              (b"BM", "BMP"), (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"))


@dataclass(frozen=True)
class Accepted:
    id: str
    data: bytes          # what to store: the original bytes when no change was needed, else re-encoded
    extension: str
    width: int
    height: int
    changes: tuple[str, ...]
    phash: str = ""      # perceptual hash of the picture, taken at ingest (ingest/near_duplicates.py)


@dataclass(frozen=True)
class Rejected:
    rule: str
    reason: str
    id: str = ""


def _flatten(img: PILImage.Image) -> tuple[PILImage.Image, list[str]]:
    """Return an 8-bit RGB image, noting what had to change."""
    changes: list[str] = []
    mode = img.mode
    if mode == "RGB":
        return img, changes
    if mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        changes.append(f"{mode}->8bit")
        arr = img.convert("F") if mode != "F" else img
        lo, hi = arr.getextrema()
        scale = 255.0 / (hi - lo) if hi > lo else 0.0
        img = arr.point(lambda v: (v - lo) * scale).convert("L")
        mode = "L"
    if mode in ("P", "PA"):
        changes.append("palette->rgb")
        img = img.convert("RGBA")
        mode = "RGBA"
    if mode in ("RGBA", "LA", "La", "RGBa"):
        changes.append("alpha->white")
        rgba = img.convert("RGBA")
        canvas = PILImage.new("RGB", rgba.size, (255, 255, 255))
        canvas.paste(rgba, mask=rgba.getchannel("A"))
        return canvas, changes
    changes.append(f"{mode}->rgb")
    return img.convert("RGB"), changes


def inspect_image(data: bytes, *, min_side: int, max_pixels: int) -> Accepted | Rejected:
    if not data:
        return Rejected("empty", "file is empty (0 bytes)")
    image_id = sha256_bytes(data)
    try:
        with warnings.catch_warnings():  # our own `max_pixels` decides below; Pillow's warning is noise
            warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)
            img = PILImage.open(io.BytesIO(data))
    except PILImage.DecompressionBombError as exc:  # over Pillow's own ceiling, whatever max_pixels says
        return Rejected("too_many_pixels", f"{exc} (possible decompression bomb)", image_id)
    except UnidentifiedImageError:
        claimed = next((fmt for magic, fmt in SIGNATURES if data.startswith(magic)), None)
        if claimed:
            return Rejected("corrupt", f"starts like a {claimed} file but its header is damaged", image_id)
        return Rejected("not_an_image", "not an image Pillow can read (unknown or unsupported format)", image_id)
    except Exception as exc:  # noqa: BLE001 - any decoder failure is a property of the file
        return Rejected("corrupt", f"header cannot be read: {exc}", image_id)
    width, height = img.size
    if width * height > max_pixels:
        return Rejected("too_many_pixels", f"{width}x{height} is over the {max_pixels:,}-pixel limit "
                        "(possible decompression bomb)", image_id)
    fmt = img.format or ""
    n_frames = getattr(img, "n_frames", 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            img.seek(0)
            img.load()
    except Exception as exc:  # noqa: BLE001
        rule = "truncated" if isinstance(exc, OSError) and "truncated" in str(exc).lower() else "corrupt"
        return Rejected(rule, f"pixel data cannot be decoded: {exc}", image_id)
    changes = ["first-frame"] if n_frames > 1 else []
    orientation = img.getexif().get(0x0112, 1)
    if orientation not in (1, None):
        img = ImageOps.exif_transpose(img)
        changes.append("exif-orientation")
    img, flattened = _flatten(img)
    changes.extend(flattened)
    width, height = img.size
    if min(width, height) < min_side:
        return Rejected("too_small", f"{width}x{height} is below the minimum side of {min_side} px", image_id)
    if not changes and fmt in ("JPEG", "PNG"):
        kept = strip_jpeg_metadata(data) if fmt == "JPEG" else strip_png_metadata(data)
        return Accepted(image_id, kept, ".jpg" if fmt == "JPEG" else ".png", width, height,
                        ("metadata-stripped",) if kept != data else ())
    buffer = io.BytesIO()
    if fmt == "JPEG":
        img.save(buffer, "JPEG", quality=95)
    else:
        img.save(buffer, "PNG", compress_level=1)
    return Accepted(image_id, buffer.getvalue(), ".jpg" if fmt == "JPEG" else ".png", width, height, tuple(changes))


# JPEG segments that carry EXIF (GPS, camera serials), XMP, IPTC or comments; never pixels or colour.
_JPEG_METADATA = {0xE1, 0xED, 0xFE}
# PNG chunks that carry EXIF or free text.
_PNG_METADATA = {b"eXIf", b"tEXt", b"iTXt", b"zTXt", b"tIME"}


def strip_jpeg_metadata(data: bytes) -> bytes:
    """The same JPEG without EXIF/XMP/IPTC/comment segments, pixels untouched (no re-encoding)."""
    out = bytearray(data[:2])
    pos = 2
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker == 0xDA:  # start of scan: the rest is image data
            break
        length = int.from_bytes(data[pos + 2:pos + 4], "big")
        if marker not in _JPEG_METADATA:
            out += data[pos:pos + 2 + length]
        pos += 2 + length
    return bytes(out + data[pos:])


def strip_png_metadata(data: bytes) -> bytes:
    """The same PNG without eXIf and text chunks."""
    out = bytearray(data[:8])
    pos = 8
    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        end = pos + 12 + length
        if data[pos + 4:pos + 8] not in _PNG_METADATA:
            out += data[pos:end]
        pos = end
    return bytes(out + data[pos:])


def open_rgb(path) -> PILImage.Image:
    """Open a stored (already normalised) image as RGB."""
    with PILImage.open(path) as img:
        return img.convert("RGB")
