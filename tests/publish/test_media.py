"""Published image bytes: pixels only, from inside the media folder, encoded once."""

from __future__ import annotations

import io
import os

import pytest
from PIL import Image as PILImage

from publish.media import CleanImages, MediaError, clean_image, resolve_media


def camera_jpeg(path):
    exif = PILImage.Exif()
    exif[0x010F] = "ExampleCam"
    exif[0x8825] = {1: "N", 2: (52.0, 31.0, 12.0)}
    PILImage.new("RGB", (40, 30), (200, 30, 30)).save(path, "JPEG", exif=exif.tobytes(), icc_profile=b"\0" * 128)
    return path


@pytest.mark.parametrize("image_format", ["png", "jpeg"])
def test_reencoding_keeps_the_pixels_and_drops_every_piece_of_metadata(tmp_path, image_format):
    data = clean_image(camera_jpeg(tmp_path / "c.jpg"), image_format)
    with PILImage.open(io.BytesIO(data)) as img:
        assert img.format == image_format.upper() and img.size == (40, 30)
        assert len(img.getexif()) == 0 and "exif" not in img.info and "icc_profile" not in img.info
        assert max(abs(a - b) for a, b in zip(img.convert("RGB").getpixel((20, 15)), (200, 30, 30))) <= 3


def test_media_paths_cannot_climb_out_of_the_media_folder(tmp_path):
    (tmp_path / "media").mkdir()
    (tmp_path / "secret.png").write_bytes(b"x")
    with pytest.raises(MediaError, match="outside the media folder"):
        resolve_media(tmp_path / "media", "../secret.png")
    with pytest.raises(MediaError, match="missing"):
        resolve_media(tmp_path / "media", "aa/gone.png")


def test_an_undecodable_file_is_a_clear_error(tmp_path):
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(MediaError, match="cannot decode bad.png"):
        CleanImages(tmp_path / "media", tmp_path / "cache", "png", 95)("bad.png")


def test_each_image_is_encoded_once_until_its_file_changes(tmp_path):
    media = tmp_path / "media"
    media.mkdir()
    camera_jpeg(media / "c.jpg")
    images = CleanImages(media, tmp_path / "cache", "png", 95)
    first = images("c.jpg")
    [cached] = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    cached.write_bytes(b"served from the cache")
    assert images("c.jpg") == b"served from the cache"
    PILImage.new("RGB", (40, 30), "blue").save(media / "c.jpg", "JPEG")
    os.utime(media / "c.jpg", ns=(1, 1))
    changed = images("c.jpg")
    assert changed != first and PILImage.open(io.BytesIO(changed)).getpixel((0, 0))[2] > 200
