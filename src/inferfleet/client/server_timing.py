"""``Server-Timing`` headers, parsed by the spec (L-50).

``Server-Timing: ttft;dur=402.485, queue;dur=3;desc="wait"`` carries the unit
in the *parameter* half: each metric is ``name`` followed by ``;param=value``
pairs, metrics are separated by commas and values may be quoted strings that
contain commas or semicolons themselves. A parser that splits on ``=`` first
reads the metric name ``ttft;dur`` and every later lookup of ``ttft``
silently returns nothing; this one splits metrics, then parameters, then
names from values.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    dur_ms: float | None
    desc: str | None


def parse(values: str | Iterable[str]) -> dict[str, Metric]:
    """All metrics of one or more header values, by lower-cased name.

    A repeated name keeps its first occurrence, as the spec asks. Malformed
    parameters are skipped, never fatal: a benchmark must not crash on a
    server's decoration.
    """
    texts = [values] if isinstance(values, str) else list(values)
    metrics: dict[str, Metric] = {}
    for text in texts:
        for entry in _split(text, ","):
            parts = _split(entry, ";")
            name = parts[0].strip().lower() if parts else ""
            if not name or not _is_token(name):
                continue
            dur: float | None = None
            desc: str | None = None
            for param in parts[1:]:
                key, sep, raw = param.partition("=")
                key = key.strip().lower()
                value = _unquote(raw.strip()) if sep else ""
                if key == "dur" and dur is None:
                    try:
                        dur = float(value)
                    except ValueError:
                        dur = None
                elif key == "desc" and desc is None:
                    desc = value
            metrics.setdefault(name, Metric(name, dur, desc))
    return metrics


def durations(values: str | Iterable[str]) -> dict[str, float]:
    """Just the metrics that carry a duration, in milliseconds."""
    return {name: m.dur_ms for name, m in parse(values).items() if m.dur_ms is not None}


def _split(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside double-quoted strings (with backslash escapes)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    escaped = False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif quoted and char == "\\":
            current.append(char)
            escaped = True
        elif char == '"':
            current.append(char)
            quoted = not quoted
        elif char == sep and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in (part.strip() for part in parts) if p]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        inner = value[1:-1]
        out: list[str] = []
        escaped = False
        for char in inner:
            if escaped:
                out.append(char)
                escaped = False
            elif char == "\\":
                escaped = True
            else:
                out.append(char)
        return "".join(out)
    return value


_TOKEN_EXTRA = set("!#$%&'*+-.^_`|~")


def _is_token(name: str) -> bool:
    return all(c.isalnum() or c in _TOKEN_EXTRA for c in name)
