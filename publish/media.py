"""Published images: decoded and re-encoded from pixels only, so no EXIF, GPS, ICC or text chunk survives."""

from __future__ import annotations

import io
import os
from pathlib import Path

from PIL import Image as PILImage

from benchsmith.errors import BenchsmithError
from benchsmith.records import stable_hash


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


class CleanImages:
    """Clean encodings of stored media, kept on disk under the cache folder: an image that several
    questions (or dimensions, or later versions) show is decoded and encoded once."""

    def __init__(self, media_dir: Path, cache_dir: Path, image_format: str, jpeg_quality: int) -> None:
        self.media_dir = media_dir
        self.cache_dir = cache_dir / "publish" / (f"jpeg{jpeg_quality}" if image_format == "jpeg" else "png")
        self.image_format, self.jpeg_quality = image_format, jpeg_quality

    def __call__(self, relative: str) -> bytes:
        source, cached = self._paths(relative)
        return cached.read_bytes() if cached.is_file() else self._encode(source, cached)

    def ensure(self, relative: str) -> bool:
        """Put the clean encoding of `relative` in the cache; True when it was encoded now, False when it
        was there already. Safe to run twice or at once in several processes: each write is atomic."""
        source, cached = self._paths(relative)
        if cached.is_file():
            return False
        self._encode(source, cached)
        return True

    def _paths(self, relative: str) -> tuple[Path, Path]:
        """The stored file and its cache entry, keyed by path, size and modification time."""
        source = resolve_media(self.media_dir, relative)
        stat = source.stat()
        key = stable_hash(relative, stat.st_size, stat.st_mtime_ns)
        return source, self.cache_dir / key[:2] / key

    def _encode(self, source: Path, cached: Path) -> bytes:
        data = clean_image(source, self.image_format, self.jpeg_quality)
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        partial.write_bytes(data)
        os.replace(partial, cached)
        return data
