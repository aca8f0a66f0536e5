"""Checking and normalising single image files."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pytest
from PIL import Image

from benchsmith.images import Accepted, Rejected, inspect_image

LIMITS = {"min_side": 16, "max_pixels": 10_000_000}


def encode(img: Image.Image, fmt: str, **save) -> bytes:
    buffer = io.BytesIO()
    img.save(buffer, fmt, **save)
    return buffer.getvalue()


def decoded(result: Accepted) -> Image.Image:
    return Image.open(io.BytesIO(result.data))


def test_a_plain_rgb_png_is_kept_byte_for_byte():
    data = encode(Image.new("RGB", (40, 30), (10, 20, 30)), "PNG")
    result = inspect_image(data, **LIMITS)
    assert isinstance(result, Accepted)
    assert result.data == data and (result.width, result.height) == (40, 30) and result.changes == ()


@pytest.mark.parametrize("mode, fill", [("CMYK", (0, 255, 255, 0)), ("L", 128), ("LA", (128, 255)),
                                        ("RGBA", (255, 0, 0, 255)), ("P", 3)])
def test_other_modes_become_rgb(mode, fill):
    result = inspect_image(encode(Image.new(mode, (32, 32), fill), "TIFF" if mode == "CMYK" else "PNG"), **LIMITS)
    assert isinstance(result, Accepted)
    assert decoded(result).mode == "RGB"


def test_transparent_pixels_are_laid_on_white():
    img = Image.new("RGBA", (32, 32), (255, 0, 0, 0))
    result = inspect_image(encode(img, "PNG"), **LIMITS)
    assert decoded(result).getpixel((5, 5)) == (255, 255, 255)


def test_sixteen_bit_images_are_scaled_to_eight_bits():
    ramp = np.tile(np.linspace(0, 65535, 64, dtype=np.uint16), (32, 1))
    result = inspect_image(encode(Image.fromarray(ramp), "PNG"), **LIMITS)
    pixels = decoded(result).convert("L")
    assert pixels.getpixel((0, 0)) == 0 and pixels.getpixel((63, 0)) == 255


def test_exif_orientation_is_applied():
    img = Image.new("RGB", (60, 20), (0, 0, 255))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 clockwise to display
    result = inspect_image(encode(img, "JPEG", exif=exif), **LIMITS)
    assert (result.width, result.height) == (20, 60)
    assert "exif-orientation" in result.changes


def test_an_animation_contributes_its_first_frame():
    frames = [Image.new("RGB", (32, 32), c) for c in ((255, 0, 0), (0, 255, 0))]
    data = encode(frames[0], "GIF", save_all=True, append_images=frames[1:])
    result = inspect_image(data, **LIMITS)
    assert "first-frame" in result.changes
    r, g, _ = decoded(result).getpixel((1, 1))
    assert r > 200 and g < 50


@pytest.mark.parametrize("data, rule", [
    (b"", "empty"),
    (b"just some text, not pixels", "not_an_image"),
    (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "not_an_image"),
])
def test_non_images_are_refused(data, rule):
    assert inspect_image(data, **LIMITS).rule == rule


def test_truncated_files_are_refused():
    noise = np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    for fmt in ("PNG", "JPEG"):
        data = encode(Image.fromarray(noise), fmt)
        result = inspect_image(data[: len(data) // 2], **LIMITS)
        assert isinstance(result, Rejected) and result.rule == "truncated", (fmt, result)


def test_a_broken_header_is_refused():
    data = encode(Image.new("RGB", (32, 32)), "PNG")
    result = inspect_image(data[:16] + b"\x00" * 40 + data[56:], **LIMITS)
    assert isinstance(result, Rejected) and result.rule in ("corrupt", "truncated")


def test_too_many_pixels_is_refused_before_decoding():
    bomb = encode(Image.new("1", (5000, 3000)), "PNG")  # 15 Mpx in a few kB
    result = inspect_image(bomb, **LIMITS)
    assert result.rule == "too_many_pixels" and "decompression bomb" in result.reason


def test_small_images_are_refused():
    assert inspect_image(encode(Image.new("RGB", (100, 8)), "PNG"), **LIMITS).rule == "too_small"


def test_a_bomb_past_pillows_own_ceiling_is_refused_and_pillows_guard_stays_on():
    huge = encode(Image.new("1", (20000, 10000)), "PNG")  # 200 Mpx: past Pillow's 2 x MAX_IMAGE_PIXELS
    result = inspect_image(huge, min_side=16, max_pixels=500_000_000)
    assert result.rule == "too_many_pixels" and "decompression bomb" in result.reason
    assert Image.MAX_IMAGE_PIXELS is not None  # checking images does not switch the guard off for others


def test_stored_copies_carry_no_exif_location_and_keep_their_pixels():
    noise = Image.fromarray(np.random.default_rng(2).integers(0, 255, (40, 40, 3), dtype=np.uint8))
    exif = Image.Exif()
    exif[0x8825] = {2: (51.0, 30.0, 0.0), 1: "N"}  # GPS latitude
    exif[0x010F] = "Camera Maker"
    for fmt in ("JPEG", "PNG"):
        data = encode(noise, fmt, exif=exif)
        assert Image.open(io.BytesIO(data)).getexif()
        result = inspect_image(data, **LIMITS)
        stored = decoded(result)
        assert not stored.getexif() and "metadata-stripped" in result.changes, fmt
        assert np.array_equal(np.asarray(stored), np.asarray(Image.open(io.BytesIO(data))))
        assert result.id == hashlib.sha256(data).hexdigest()  # the id is still the original bytes
