"""Documents of ``render`` and ``diff``."""

from __future__ import annotations

from typing import (
    Literal,
)

from typing_extensions import TypedDict


class RenderedFile(TypedDict):
    path: str
    kind: str
    sha256: str
    install: str | None


class RenderDocument(TypedDict):
    schema: Literal["inferfleet.render/v1"]
    file: str
    out: str
    files: list[RenderedFile]


class DiffChange(TypedDict):
    path: str
    status: str  # added | changed | removed
    diff: str


class DiffDocument(TypedDict):
    schema: Literal["inferfleet.diff/v1"]
    out: str
    changes: list[DiffChange]
