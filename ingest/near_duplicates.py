"""The same picture in other bytes: a perceptual hash of every ingested image, and the stored image it
repeats, if any.

Byte-identical files share an id and are caught by it. A copy saved again (another JPEG quality), resized
by a few pixels, cropped a little at the edges or recoloured has other bytes but the same picture. Two
checks decide, both under `ingest.near_duplicates`:
- its perceptual hash (`imagehash.phash`: the signs of the lowest 8x8 frequencies of the picture shrunk to
  32x32 greys, 64 bits) is within `distance` bits of a stored image's; two different photographs differ in
  about half of them. This is the cheap part, taken for every image;
- and the two agree in detail (`detail`): cut into 4x4 tiles, no tile with any contrast differs by more
  than that many bits of its own hash, after the better of a few small crops of either picture lines
  them up. Pages drawn from one template (receipts of one shop, charts of one layout) look alike at
  32x32 and fail here, where the tiles with other text differ. It runs only for the few stored images
  the hash puts near.
A stored image counts whatever its status (published, in review, filtered out). Drawn pictures whose
truth differs (ingest/stage.py, `told_apart`) are different pictures however alike they look.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import imagehash
import numpy as np
from PIL import Image as PILImage

from benchsmith.settings import NearDuplicateSettings

HASH_SIDE = 32        # phash shrinks the picture to this many pixels a side before its DCT
DETAIL_SIDE = 256     # the detail check compares the pictures at this size, in TILES x TILES tiles
TILES = 4
MIN_TILE_CONTRAST = 8.0                        # grey levels (std): a flat tile's hash is noise, not detail
CROPS = (0.0, 0.01, 0.02, 0.03, 0.04, 0.06)    # share of each side cut away when lining the pictures up


def perceptual_hash(data: bytes) -> str:
    """The 64-bit perceptual hash of an image file's picture, as 16 hex digits. A JPEG is decoded at a
    reduced scale (`draft`), so hashing costs a few milliseconds even for a large photo."""
    return str(imagehash.phash(_grey(data, 4 * HASH_SIDE)))


def _grey(data: bytes, side: int) -> PILImage.Image:
    with PILImage.open(io.BytesIO(data)) as image:
        image.draft("L", (side, side))
        return image.convert("L")


def _tiles(image: PILImage.Image) -> list[tuple[imagehash.ImageHash, float]]:
    pixels = np.asarray(image.resize((DETAIL_SIDE, DETAIL_SIDE), PILImage.BILINEAR), dtype=np.uint8)
    step = DETAIL_SIDE // TILES
    blocks = [pixels[y:y + step, x:x + step] for y in range(0, DETAIL_SIDE, step) for x in range(0, DETAIL_SIDE, step)]
    return [(imagehash.phash(PILImage.fromarray(block)), float(block.std())) for block in blocks]


def _cropped(image: PILImage.Image, share: float) -> PILImage.Image:
    w, h = image.size
    dx, dy = round(w * share), round(h * share)
    return image.crop((dx, dy, w - dx, h - dy)) if share else image


def detail_distance(a: PILImage.Image, b: PILImage.Image, enough: int = 0) -> int:
    """How far two pictures differ in detail: the largest tile-hash distance over the tiles with contrast,
    at the best of the small crops of either picture (one may be a crop of the other). Pictures with no
    tile of contrast (a flat colour) are 64 apart: nothing in them says they are one picture. The search
    stops at the first alignment within `enough` bits."""
    best = 64
    whole_a, whole_b = _tiles(a), _tiles(b)
    for share in CROPS:
        pairs = [(whole_a, whole_b)] if not share else [(_tiles(_cropped(a, share)), whole_b),
                                                         (whole_a, _tiles(_cropped(b, share)))]
        for tiles_a, tiles_b in pairs:
            distances = [ha - hb for (ha, sa), (hb, sb) in zip(tiles_a, tiles_b) if max(sa, sb) >= MIN_TILE_CONTRAST]
            best = min(best, max(distances, default=64))  # a flat picture has no detail: only its bytes name it
        if best <= enough:
            break
    return best


@dataclass(frozen=True)
class Match:
    """The stored image a new one repeats: its id and name, and how far apart the two are."""

    item_id: str
    name: str
    distance: int   # perceptual-hash bits
    detail: int     # the detail check's bits


@dataclass
class HashIndex:
    """The stored images' hashes, searched all at once (XOR and bit count over an array), and how to read
    a stored image's bytes for the detail check."""

    read: Callable[[str], bytes]                          # path -> bytes
    ids: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    # the hashes in a buffer that doubles when full: adding one after each lookup writes one slot
    _hashes: np.ndarray = field(default_factory=lambda: np.zeros(1024, dtype=np.uint64))

    @classmethod
    def of(cls, rows, media_dir: Path) -> tuple[HashIndex, dict[str, str]]:
        """An index of stored images from (id, name, path, hash) rows; an image stored before hashes were
        taken is hashed from its media file. Returns the index and those new hashes (id -> hash)."""
        index, taken = cls(lambda path: (media_dir / path).read_bytes()), {}
        for item_id, name, path, phash in rows:
            if not phash:
                try:
                    phash = taken[item_id] = perceptual_hash(index.read(path))
                except OSError:  # its media file is gone: nothing to compare with
                    continue
            index.add(item_id, name, path, phash)
        return index, taken

    def add(self, item_id: str, name: str, path: str, phash: str) -> None:
        self.ids.append(item_id)
        self.names.append(name)
        self.paths.append(path)
        if len(self.ids) > len(self._hashes):
            self._hashes = np.concatenate([self._hashes, np.zeros_like(self._hashes)])
        self._hashes[len(self.ids) - 1] = int(phash, 16)

    def near(self, phash: str, within: int) -> list[tuple[int, int]]:
        """(position, distance) of the stored hashes within `within` bits of `phash`, nearest first."""
        if not self.ids:
            return []
        distances = np.bitwise_count(self._hashes[:len(self.ids)] ^ np.uint64(int(phash, 16)))
        close = np.flatnonzero(distances <= within)
        return sorted(((int(i), int(distances[i])) for i in close), key=lambda pair: (pair[1], pair[0]))

    def same_picture(self, data: bytes, phash: str, settings: NearDuplicateSettings,
                     apart: Callable[[str], bool] = lambda _item_id: False) -> Match | None:
        """The stored image `data` (hashed `phash`) repeats, or None; `apart(item id)` rules out a stored
        image known by other means to be another picture."""
        near = [(position, distance) for position, distance in self.near(phash, settings.distance)
                if not apart(self.ids[position])]
        if not near:
            return None
        picture = _grey(data, 2 * DETAIL_SIDE)
        for position, distance in near:
            try:
                stored = _grey(self.read(self.paths[position]), 2 * DETAIL_SIDE)
            except OSError:
                continue
            if (detail := detail_distance(picture, stored, settings.detail)) <= settings.detail:
                return Match(self.ids[position], self.names[position], distance, detail)
        return None
