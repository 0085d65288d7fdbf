"""Files already on disk: their hashes, and the record of what was verified.

The record is :mod:`inferfleet.models.artifacts`'s own
(``.inferfleet-verified.json``: path -> stat key and sha256), so a file that
fetch verified is not hashed again by verify or by ``up``, and the other way
round. Entries of non-LFS files carry ``gitsha1`` instead of ``sha256``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inferfleet.models import artifacts

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


def stat_key(st: os.stat_result) -> list[int]:
    """What must not change for a verified file to stay verified."""
    return [st.st_size, st.st_mtime_ns, st.st_ino]


class Record:
    """The verification record of one model dir; thread-safe; saved atomically."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / artifacts.VERIFY_RECORD
        self._lock = threading.Lock()
        self._data = artifacts.read_record(self.path)

    def vouches(
        self, rel: str, st: os.stat_result, *, sha256: str | None, gitsha1: str | None
    ) -> bool:
        """Whether ``rel`` was verified with these hashes and has not changed since."""
        with self._lock:
            known = self._data.get(rel)
        if not known or known.get("stat") != stat_key(st):
            return False
        if sha256 is not None and known.get("sha256") != sha256:
            return False
        return gitsha1 is None or known.get("gitsha1") == gitsha1

    def known_sha256(self, rel: str, st: os.stat_result) -> str | None:
        with self._lock:
            known = self._data.get(rel)
        if known and known.get("stat") == stat_key(st) and isinstance(known.get("sha256"), str):
            return str(known["sha256"])
        return None

    def recorded_sha256(self, rel: str) -> str | None:
        """The sha256 recorded for ``rel`` even if the file changed since (to compare)."""
        with self._lock:
            known = self._data.get(rel)
        value = known.get("sha256") if known else None
        return value if isinstance(value, str) else None

    def put(self, rel: str, st: os.stat_result, *, sha256: str | None, gitsha1: str | None) -> None:
        entry: dict[str, object] = {"stat": stat_key(st)}
        if sha256 is not None:
            entry["sha256"] = sha256
        if gitsha1 is not None:
            entry["gitsha1"] = gitsha1
        with self._lock:
            self._data[rel] = entry
            artifacts.write_record(self.path, self._data)

    def forget(self, rel: str) -> None:
        with self._lock:
            if self._data.pop(rel, None) is not None:
                artifacts.write_record(self.path, self._data)
