"""Published images: decoded and re-encoded from pixels only, so no EXIF, GPS, ICC or text chunk survives."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image as PILImage

from benchsmith.errors import BenchsmithError


class MediaError(BenchsmithError, FileNotFoundError):
    """A stored image or frame cannot be read for publishing."""


def resolve_media(media_dir: Path, relative: str) -> Path:
    """The file behind a stored media path, refusing paths that climb out of the media folder."""
    root = media_dir.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise MediaError(f"media path {relative!r} points outside the media folder; the store is damaged")
    if not path.is_file():
        raise MediaError(f"media file {relative!r} is missing from the workspace media folder; re-ingest it")
    return path


def clean_image(path: Path, image_format: str = "png", jpeg_quality: int = 95) -> bytes:
    """The image's pixels as a fresh RGB PNG or JPEG, with no metadata of any kind."""
    try:
        with PILImage.open(path) as img:
            rgb = img.convert("RGB")
    except (OSError, ValueError) as exc:
        raise MediaError(f"cannot decode {path.name}: {exc}") from None
    bare = PILImage.frombytes("RGB", rgb.size, rgb.tobytes())  # a new image carries no info from the file
    buffer = io.BytesIO()
    if image_format == "jpeg":
        bare.save(buffer, "JPEG", quality=jpeg_quality)
    else:
        bare.save(buffer, "PNG", optimize=False)
    return buffer.getvalue()
