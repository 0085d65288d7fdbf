"""Hashes of files on disk: sha256 and, for small non-LFS files, the git blob id."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_BLOCK = 4 << 20


@dataclass(frozen=True)
class Digests:
    sha256: str
    gitsha1: str  # sha1 of "blob SIZE\0" + content: the id git (and the Hub tree) gives it


def file_digests(
    path: Path, *, size: int, git: bool = False, on_bytes: Callable[[int], None] | None = None
) -> Digests:
    """Hash ``path`` (whose ``stat`` size the caller checked, L-08) in 4 MiB blocks.

    hashlib releases the GIL on large blocks, so threads hash files in
    parallel on as many cores as there are.
    """
    sha256 = hashlib.sha256()
    gitsha1 = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            sha256.update(block)
            if git:
                gitsha1.update(block)
            if on_bytes is not None:
                on_bytes(len(block))
    return Digests(sha256.hexdigest(), gitsha1.hexdigest() if git else "")
