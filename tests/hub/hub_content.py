"""What the test Hub serves: file contents as segments, repos, fault knobs, the log."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

Segment = bytes | tuple[Path, int, int]


@dataclass
class Blob:
    """File content as segments: bytes, or ``(path, offset, length)`` slices on disk."""

    segments: list[Segment]
    sha256: str = ""

    @property
    def size(self) -> int:
        return sum(len(s) if isinstance(s, bytes) else s[2] for s in self.segments)

    def hashed(self) -> Blob:
        if not self.sha256:
            digest = hashlib.sha256()
            for piece in self.pieces(0, self.size):
                digest.update(piece)
            self.sha256 = digest.hexdigest()
        return self

    def pieces(self, start: int, end: int, block: int = 4 << 20) -> Iterator[bytes]:
        """The bytes [start, end) as blocks."""
        for seg_start, segment in self._spans(start, end):
            if isinstance(segment, bytes):
                yield segment[seg_start[0] : seg_start[1]]
                continue
            path, offset, _length = segment
            with path.open("rb") as handle:
                handle.seek(offset + seg_start[0])
                left = seg_start[1] - seg_start[0]
                while left > 0:
                    data = handle.read(min(block, left))
                    left -= len(data)
                    yield data

    def _spans(self, start: int, end: int) -> Iterator[tuple[tuple[int, int], Segment]]:
        at = 0
        for segment in self.segments:
            length = len(segment) if isinstance(segment, bytes) else segment[2]
            lo, hi = max(start, at), min(end, at + length)
            if lo < hi:
                yield (lo - at, hi - at), segment
            at += length

    def read(self) -> bytes:
        return b"".join(self.pieces(0, self.size))


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class RepoFile:
    path: str
    blob: Blob
    lfs: bool

    @property
    def pointer(self) -> bytes:
        return (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.blob.sha256}\n"
            f"size {self.blob.size}\n"
        ).encode()

    @property
    def git_oid(self) -> str:
        return git_blob_id(self.pointer if self.lfs else self.blob.read())

    @property
    def cas(self) -> str:
        # Xet: the CDN's ETag is a CAS hash of its own, never the sha256 (L-02).
        key = f"{self.path}\0{self.blob.sha256}".encode()
        return hashlib.blake2b(key, digest_size=32).hexdigest()


@dataclass
class Repo:
    repo_id: str
    files: dict[str, RepoFile]
    commit: str = ""
    gated: bool = False
    private: bool = False
    branches: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.commit:
            self.commit = hashlib.sha1(self.repo_id.encode()).hexdigest()
        self.branches.setdefault("main", self.commit)


@dataclass
class Faults:
    """One-shot faults; each counter is consumed by the requests it hits."""

    resolve_500: int = 0  # next N resolve requests: 500
    cdn_500: int = 0  # next N CDN requests: 500 (a burst)
    drop_after: list[int] = field(default_factory=list)  # next bodies: close after N bytes
    corrupt: int = 0  # next N bodies: one byte flipped, length right
    ignore_range: int = 0  # next N Range requests: 200 with the whole body
    stall: list[tuple[int, float]] = field(default_factory=list)  # (after N bytes, seconds)
    cdn_error: list[tuple[int, bytes]] = field(default_factory=list)  # (status, body)
    cdn_wrong_body: list[bytes] = field(default_factory=list)  # 200 with this body
    rate: float | None = None  # bytes per second for every body (slow server)
    paths: set[str] | None = None  # limit body faults to these repo paths


@dataclass
class Logged:
    host: str  # hub | cdn
    method: str
    path: str
    range: str | None
    auth: str | None
    status: int = 0
