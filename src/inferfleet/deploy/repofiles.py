"""The repository files a service's inputs name, at one revision (L-40).

Standard library only: the host's no-op fast path (:mod:`inferfleet.deploy.noop`)
re-evaluates the same files with it before any fleet model is imported.
"""

from __future__ import annotations

import bisect
import fnmatch
from collections.abc import Iterable, Mapping

MISSING = "-"  # the blob id recorded for a declared file that does not exist
_GLOB = set("*?[")


class RepoFiles:
    """The files of one revision (path -> blob id), for exact, folder and glob lookups."""

    def __init__(self, blobs: Mapping[str, str]) -> None:
        # Kept as given: a working tree's blob ids are computed only when read.
        self.blobs = blobs
        self._sorted = sorted(self.blobs)

    def match(self, pattern: str) -> dict[str, str]:
        """Files a declared path names: the file, everything under a folder, or a glob."""
        pattern = pattern.strip()
        if pattern.startswith("./"):
            pattern = pattern[2:]
        if any(ch in _GLOB for ch in pattern):
            return {p: self.blobs[p] for p in self._sorted if fnmatch.fnmatchcase(p, pattern)}
        pattern = pattern.rstrip("/")
        if pattern in self.blobs:
            return {pattern: self.blobs[pattern]}
        prefix = pattern + "/"
        start = bisect.bisect_left(self._sorted, prefix)
        found: dict[str, str] = {}
        for path in self._sorted[start:]:
            if not path.startswith(prefix):
                break
            found[path] = self.blobs[path]
        return found

    def inputs(self, declared: Iterable[str], patterns: Iterable[str]) -> dict[str, str]:
        """Blob ids of the ``declared`` files (MISSING when absent) and of what each of
        ``patterns`` (a service's ``paths``) matches (the pattern as MISSING when nothing)."""
        found: dict[str, str] = {}
        for path in declared:
            found[path] = self.blobs.get(path, MISSING)
        for pattern in patterns:
            matched = self.match(pattern)
            if matched:
                found.update(matched)
            else:
                found.setdefault(pattern.rstrip("/"), MISSING)
        return dict(sorted(found.items()))
