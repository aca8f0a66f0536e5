"""How well the perceptual hash tells the same picture from another (`ingest.near_duplicate_distance`).

1. False positives: every pair of distinct real pictures in the shared data (the 332 COCO photos and the
   200 SROIE receipts, 532 pictures, 141,246 pairs), of 40 oracle scenes (seed 7) and of 80 text-rich
   pages (seed 11, every kind), the last two alike by design, judged as ingest judges them at the default
   settings (`ingest.near_duplicates`): the pairs the hash puts near, and those also alike in detail.
2. Recall: every `--copies-every`th real picture (default 4: 133) against its copies saved as JPEG quality 85, one pixel narrower, both, cropped
   by 2% and 5% of each side, brighter by 10%, and with its hue turned 56 degrees: the share found to be
   the same picture as their original among all 532.
3. Cost: milliseconds to hash one file (`perceptual_hash`, what ingest adds to every image), and to search
   100,000 stored hashes.

Results: benchmarks/results/near_duplicates.json.

    .venv/bin/python benchmarks/near_duplicates.py
    .venv/bin/python benchmarks/near_duplicates.py --quick     # 60 pictures
"""

from __future__ import annotations

import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, save  # noqa: E402


def real_pictures(limit: int | None) -> list[Path]:
    from tests.support.shared_data import require_shared_data

    coco = sorted(require_shared_data("coco-mini-train").rglob("*.jpg")) + sorted(
        require_shared_data("coco128", "images").rglob("*.jpg"))
    receipts = sorted(require_shared_data("sroie", "data", "img").glob("*.jpg"))
    pictures = coco + receipts
    return pictures[:: max(1, len(pictures) // limit)][:limit] if limit else pictures


def encoded(image: Image.Image, quality: int = 95) -> bytes:
    out = io.BytesIO()
    image.convert("RGB").save(out, "JPEG", quality=quality)
    return out.getvalue()


def copies(data: bytes) -> dict[str, bytes]:
    """The same picture as another source might send it."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    w, h = image.size

    def crop(share: float) -> Image.Image:
        dx, dy = round(w * share), round(h * share)
        return image.crop((dx, dy, w - dx, h - dy))

    hsv = np.array(image.convert("HSV"))
    hsv[..., 0] = (hsv[..., 0].astype(int) + 40) % 256
    return {"jpeg_q85": encoded(image, 85), "one_pixel_narrower": encoded(image.resize((w - 1, h))),
            "narrower_and_q85": encoded(image.resize((w - 1, h)), 85), "crop_2pct": encoded(crop(0.02)),
            "crop_5pct": encoded(crop(0.05)), "brighter_10pct": encoded(ImageEnhance.Brightness(image).enhance(1.1)),
            "hue_turned": encoded(Image.fromarray(hsv, "HSV").convert("RGB"))}


def pairwise(data: list[bytes], hashes: list[str], settings, names: list[str]) -> dict:
    """Every pair of distinct pictures: those the hash alone puts within `distance`, and those also alike
    in detail (refused as the same picture). Pairs whose pixels are identical are the same picture twice
    in the data, not false positives, and are counted apart."""
    from ingest.near_duplicates import DETAIL_SIDE, _grey, detail_distance

    values = np.array([int(h, 16) for h in hashes], dtype=np.uint64)
    near = [(i, j, int(d)) for i in range(len(values) - 1)
            for j, d in zip(range(i + 1, len(values)), np.bitwise_count(values[i + 1:] ^ values[i])) if d <= settings.distance]
    pairs = len(values) * (len(values) - 1) // 2
    same, twice = [], []
    for i, j, distance in near:
        a, b = _grey(data[i], 2 * DETAIL_SIDE), _grey(data[j], 2 * DETAIL_SIDE)
        if (detail := detail_distance(a, b, settings.detail)) <= settings.detail:
            identical = a.size == b.size and np.array_equal(np.asarray(a), np.asarray(b))
            (twice if identical else same).append({"pair": [names[i], names[j]], "distance": distance, "detail": detail})
    return {"pictures": len(values), "pairs": pairs, "pairs_near_by_hash": len(near),
            "identical_pixels": twice, "false_positives": same, "false_positive_rate": len(same) / pairs}


def run(limit: int | None, copies_every: int) -> dict:
    from benchsmith.settings import IngestSettings
    from ingest.near_duplicates import HashIndex, perceptual_hash
    from ingest.scenes import make_scenes
    from ingest.textrich import make_pages

    settings = IngestSettings().near_duplicates
    pictures = real_pictures(limit)
    data = [p.read_bytes() for p in pictures]
    names = [str(p.relative_to(p.parents[2])) for p in pictures]
    perceptual_hash(data[0])  # imports the DCT once, outside the timing
    started = time.perf_counter()
    hashes = [perceptual_hash(d) for d in data]
    hash_ms = (time.perf_counter() - started) * 1000 / len(data)

    result = {"settings": settings.model_dump(), "hash_ms_per_image": round(hash_ms, 2),
              "real_pictures": pairwise(data, hashes, settings, names)}
    save("near_duplicates", result)  # each part as it is measured: the copies take longest

    index = HashIndex(lambda path: data[int(path)])
    for n, h in enumerate(hashes):
        index.add(names[n], names[n], str(n), h)
    caught: dict[str, list[bool]] = {}
    for n, d in list(enumerate(data))[::copies_every]:
        for kind, copy in copies(d).items():
            match = index.same_picture(copy, perceptual_hash(copy), settings)
            caught.setdefault(kind, []).append(match is not None and match.item_id == names[n])
    result["copies_caught"] = {kind: sum(found) / len(found) for kind, found in caught.items()}
    result["copies_of"] = len(caught["jpeg_q85"])
    save("near_duplicates", result)

    with tempfile.TemporaryDirectory() as tmp:
        make_scenes(Path(tmp) / "scenes", 40, seed=7)
        make_pages(Path(tmp) / "pages", "mix", 80, seed=11)
        drawn = {kind: sorted((Path(tmp) / kind).rglob("*.png")) for kind in ("scenes", "pages")}
        data = {kind: [p.read_bytes() for p in paths] for kind, paths in drawn.items()}
        alike = {kind: pairwise(data[kind], [perceptual_hash(b) for b in data[kind]], settings,
                                [p.name for p in paths]) for kind, paths in drawn.items()}

    rng = np.random.default_rng(0)
    many = HashIndex(lambda path: b"")
    for n, value in enumerate(rng.integers(0, 2**63, 100_000, dtype=np.int64)):
        many.add(str(n), "", "", f"{int(value):016x}")
    many.near(hashes[0], settings.distance)  # builds the array once
    started = time.perf_counter()
    for h in hashes[:200]:
        many.near(h, settings.distance)
    search_ms = (time.perf_counter() - started) * 1000 / min(200, len(hashes))

    return result | {"oracle_scenes": alike["scenes"], "textrich_pages": alike["pages"],
                     "hash_search_of_100000_ms": round(search_ms, 3)}


if __name__ == "__main__":
    args = arguments(__doc__, {"pictures": 60}, pictures=0, copies_every=4).parse_args()
    save("near_duplicates", run(args.pictures or None, args.copies_every))
