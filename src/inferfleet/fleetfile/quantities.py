"""Sizes (``24GiB``, ``512MiB``) and durations (``20m``, ``90s``, ``1h30m``).

Both also accept plain numbers (bytes, seconds). Decimal units (``GB``) are
powers of 1000, binary ones (``GiB``) powers of 1024: a 24 GB card and a
24 GiB budget differ by 1.7 GB, so we keep the user's meaning.
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
# Far above any real host or model, far below what overflows a float or an int64.
MAX_SIZE = 1 << 60  # 1 EiB
MAX_DURATION = 30 * 24 * 3600.0  # 30 days, in seconds
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|h|m|s)")


def parse_size(value: object) -> int:
    """``"24GiB"`` -> 25769803776. Raises ValueError with the accepted forms."""
    if isinstance(value, bool):
        raise ValueError("a size must be a number of bytes or a string like 24GiB")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a size cannot be negative; write bytes (1024) or e.g. 24GiB")
        return _bounded_size(value)
    if isinstance(value, str) and len(value) <= 64:
        match = _SIZE_RE.match(value)
        if match:
            number, unit = match.groups()
            factor = _SIZE_UNITS.get(unit.lower())
            if factor is not None:
                scaled = float(number) * factor
                return _bounded_size(int(scaled) if math.isfinite(scaled) else MAX_SIZE + 1)
    raise ValueError(
        f"{_shown(value)} is not a size; write bytes (1024) or a number with a unit: "
        "512MiB, 24GiB, 1.5TiB (binary) or 24GB (decimal)"
    )


def parse_duration(value: object) -> float:
    """``"1h30m"`` -> 5400.0 seconds; a bare number is seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration must be seconds or a string like 90s or 20m")
    if isinstance(value, int | float):
        if isinstance(value, float) and math.isnan(value):
            raise ValueError("a duration must be a number of seconds, not NaN")
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return _bounded_duration(float(value) if value <= MAX_DURATION else math.inf)
    if isinstance(value, str) and len(value) <= 64:
        text = value.strip().lower()
        parts = _DURATION_RE.findall(text)
        if parts and _DURATION_RE.sub("", text).strip() == "":
            scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
            return _bounded_duration(sum(float(n) * scale[u] for n, u in parts))
    raise ValueError(
        f"{_shown(value)} is not a duration; "
        "write seconds (90) or use units: 90s, 20m, 1h30m, 500ms"
    )


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _bounded_size(n: int) -> int:
    if n > MAX_SIZE:
        raise ValueError("the size is larger than 1 EiB; write the real size, e.g. 24GiB")
    return n


def _bounded_duration(seconds: float) -> float:
    if not seconds <= MAX_DURATION:  # also inf
        raise ValueError("the duration is longer than 30 days; write e.g. 20m or 1h30m")
    return seconds


def format_size(n: int) -> str:
    """Bytes for humans, binary units: 253113024 -> '241.4 MiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{sec:02d}s"


# The JSON Schema says what a user may write (editors complete from it), not
# the parsed integer.
_SIZE_SCHEMA = {
    "anyOf": [
        {"type": "integer", "minimum": 0},
        {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*([KkMmGgTt][Ii]?[Bb]?|[Bb])?\s*$"},
    ],
    "description": "bytes, or a number with a unit: 512MiB, 24GiB, 24GB",
}
_DURATION_SCHEMA = {
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^(\s*\d+(\.\d+)?\s*(ms|h|m|s))+\s*$"},
    ],
    "description": "seconds, or a duration with units: 90s, 20m, 1h30m",
}

ByteSize = Annotated[
    int, BeforeValidator(parse_size), PlainSerializer(int), WithJsonSchema(_SIZE_SCHEMA)
]
Duration = Annotated[
    float, BeforeValidator(parse_duration), PlainSerializer(float), WithJsonSchema(_DURATION_SCHEMA)
]
