"""Solid-colour PNG images for the vision probe (L-44), written with zlib + struct.

A single flat colour has exactly one right answer, so a model that never
saw the image (a legacy ``images`` field, a server without ``--mmproj``)
cannot guess its way to a pass.
"""

from __future__ import annotations

import base64
import struct
import zlib

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 20, 20),
    "green": (20, 180, 40),
    "blue": (20, 40, 220),
    "yellow": (240, 220, 20),
}

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def solid_png(rgb: tuple[int, int, int], size: int = 64) -> bytes:
    """A ``size`` x ``size`` 8-bit RGB PNG of one colour."""
    if not 1 <= size <= 4096:
        raise ValueError(f"image size must be 1..4096 pixels, not {size}")
    if any(not 0 <= c <= 255 for c in rgb):
        raise ValueError(f"colour components must be 0..255, not {rgb}")
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit, truecolour
    row = b"\x00" + bytes(rgb) * size  # filter type 0 (None) per scanline
    pixels = zlib.compress(row * size, 9)
    return _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", pixels) + _chunk(b"IEND", b"")


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
