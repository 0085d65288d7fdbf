"""A package model (``source: package``): the model file inside an installed package.

Read in place through its ``chunk_paths()``, concatenated virtually
(:class:`ChunkSource`); nothing is assembled or written. The package states
each chunk's size and the whole file's sha256.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from inferfleet.fleetfile.fleet import PackageSource
from inferfleet.gguf.source import LocalSource


class ChunkSource(LocalSource):
    """A file shipped as consecutive chunks, read as one (a package's model, in place)."""

    def __init__(self, chunks: Sequence[Path], name: str) -> None:
        self._spans: list[tuple[int, Path, int]] = []  # (start, path, size)
        start = 0
        for chunk in chunks:
            size = chunk.stat().st_size
            self._spans.append((start, chunk, size))
            start += size
        super().__init__(name, start)

    def read(self, start: int, end: int) -> bytes:
        out = bytearray()
        for begin, chunk, size in self._spans:
            lo, hi = max(start, begin), min(end, begin + size)
            if lo >= hi:
                continue
            with chunk.open("rb") as handle:
                handle.seek(lo - begin)
                out += handle.read(hi - lo)
        return bytes(out)


@dataclass(frozen=True)
class PackageFile:
    """The model file an installed package ships: its chunks, and the sha256 it states."""

    chunks: tuple[Path, ...]
    sha256: str | None

    @property
    def size(self) -> int:
        return sum(chunk.stat().st_size for chunk in self.chunks)


def package_file(name: str, source: PackageSource) -> PackageFile | str:
    """The installed package's model file, or why it cannot be read here."""
    try:
        module = importlib.import_module(source.import_name)
    except ImportError:
        return (
            f"model {name!r} comes from the package {source.package!r}, which is not installed "
            f"here (pip install {source.package})"
        )
    chunk_paths = getattr(module, "chunk_paths", None)
    if not callable(chunk_paths):
        return (
            f"model {name!r}: the package {source.package!r} does not say where its file lies "
            "(no chunk_paths()); assemble it with `inferfleet up` to check it"
        )
    try:
        chunks = tuple(Path(p) for p in chunk_paths())
        missing = [str(p) for p in chunks if not p.is_file()]
    except Exception as exc:  # a third-party package: any failure is a reason, not a crash
        return f"model {name!r}: package {source.package!r} failed to list its file: {exc}"
    if not chunks or missing:
        return f"model {name!r}: package {source.package!r} is incomplete: {', '.join(missing)}"
    stated = getattr(module, "EXPECTED_SHA256", None)
    sha = stated if isinstance(stated, str) and len(stated) == 64 else None
    return PackageFile(chunks, sha)
