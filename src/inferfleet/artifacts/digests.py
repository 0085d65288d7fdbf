"""Hashes of model bytes: sha256 and, for small non-LFS files, the git blob id.

One engine for every hash the project takes of a file: the verify gate, a
fetch that finds the file in place, and a resumed download re-hashing its
partial. Files are read with ``readinto`` into one reused buffer (no new
1 MiB object, and no fresh pages to fault in, per block), and hashlib
releases the GIL on blocks that large, so threads hash files in parallel
on as many cores as there are, each at hashlib's own speed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from inferfleet.errors import ArtifactError

BLOCK = 1 << 20  # read size: big enough to amortise a syscall, small enough to stay in cache


@dataclass(frozen=True)
class Digests:
    sha256: str
    gitsha1: str  # sha1 of "blob SIZE\0" + content: the id git (and the Hub tree) gives it


class Hashers:
    """The sha256 of a file of ``size`` bytes and, with ``git``, its git blob id."""

    def __init__(self, size: int, *, git: bool) -> None:
        self.git = git  # the blob id costs a second hash pass: non-LFS files only
        self.sha256 = hashlib.sha256()
        self.gitsha1 = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)

    def update(self, block: bytes | bytearray | memoryview) -> None:
        self.sha256.update(block)
        if self.git:
            self.gitsha1.update(block)

    def update_all(self, blocks: Sequence[bytes | bytearray | memoryview]) -> None:
        sha256 = self.sha256.update
        for block in blocks:
            sha256(block)
        if self.git:
            for block in blocks:
                self.gitsha1.update(block)

    def digests(self) -> Digests:
        return Digests(self.sha256.hexdigest(), self.gitsha1.hexdigest() if self.git else "")


def hash_into(
    hashers: Hashers,
    path: Path,
    *,
    limit: int | None = None,
    on_bytes: Callable[[int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> int:
    """Feed the first ``limit`` bytes of ``path`` (all of it for ``None``); return the count.

    ``cancelled`` is asked between blocks; when it answers true the
    function stops early and returns what it hashed so far.
    """
    buffer = bytearray(BLOCK)
    view = memoryview(buffer)
    done = 0
    with path.open("rb", buffering=0) as handle:
        while limit is None or done < limit:
            if cancelled is not None and cancelled():
                break
            want = BLOCK if limit is None else min(BLOCK, limit - done)
            count = handle.readinto(view[:want])
            if not count:
                if limit is not None:
                    raise ArtifactError(
                        f"{path} shrank while it was read ({done:,} of {limit:,} bytes)",
                        hint="something else writes this file: stop it and run again",
                        where=str(path),
                    )
                break
            hashers.update(view[:count])
            done += count
            if on_bytes is not None:
                on_bytes(count)
    return done


def file_digests(
    path: Path, *, size: int, git: bool = False, on_bytes: Callable[[int], None] | None = None
) -> Digests:
    """Hash ``path``, whose ``stat`` size the caller checked (L-08), in one pass."""
    hashers = Hashers(size, git=git)
    hash_into(hashers, path, on_bytes=on_bytes)
    return hashers.digests()
