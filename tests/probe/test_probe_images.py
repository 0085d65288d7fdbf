"""The solid-colour PNG of the vision probe (L-44) is a valid, single-colour image."""

from __future__ import annotations

import struct
import zlib

import pytest

from inferfleet.probe.images import COLOURS, data_url, solid_png


def chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    out, pos = [], 8
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + data) & 0xFFFFFFFF, f"bad CRC in {kind!r}"
        out.append((kind, data))
        pos += 12 + length
    return out


@pytest.mark.parametrize("name", sorted(COLOURS))
def test_every_pixel_has_the_colour(name: str) -> None:
    rgb = COLOURS[name]
    parts = chunks(solid_png(rgb, size=16))
    assert [k for k, _ in parts] == [b"IHDR", b"IDAT", b"IEND"]
    width, height, depth, colour_type, *_ = struct.unpack(">IIBBBBB", parts[0][1])
    assert (width, height, depth, colour_type) == (16, 16, 8, 2)
    raw = zlib.decompress(parts[1][1])
    rows = [raw[i * 49 : (i + 1) * 49] for i in range(16)]
    assert all(row[0] == 0 and row[1:] == bytes(rgb) * 16 for row in rows)


def test_pillow_reads_it_as_one_colour() -> None:
    from io import BytesIO

    from PIL import Image

    image = Image.open(BytesIO(solid_png(COLOURS["red"])))
    assert image.size == (64, 64) and image.mode == "RGB"
    assert image.getcolors() == [(64 * 64, COLOURS["red"])]


def test_data_url_carries_the_png() -> None:
    url = data_url(solid_png(COLOURS["blue"], size=2))
    assert url.startswith("data:image/png;base64,iVBORw0KGgo")


@pytest.mark.parametrize(("rgb", "size"), [((0, 0, 256), 8), ((-1, 0, 0), 8), ((0, 0, 0), 0)])
def test_bad_arguments_are_refused(rgb: tuple[int, int, int], size: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        solid_png(rgb, size=size)
