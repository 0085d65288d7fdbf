"""``inferfleet models verify``: every declared file, sizes by stat, hashes in parallel.

The same gate as :func:`inferfleet.models.artifacts.verify`, for big models:
all sizes are checked by ``stat`` first (L-08: a wrong size fails in
microseconds, and no file is read to count its bytes), then the files that
need it are hashed on all cores at once (hashlib releases the GIL). Every
problem is reported, not just the first. The verification record lets the
next run skip unchanged files unless ``full``.

Files checked: ``sha256`` (LFS), ``gitsha1`` (git blob id of small files),
and files assembled from fragments, whose sha256 is the declared one or the
one recorded when they were assembled (L-05). Size-only entries stop at stat.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from inferfleet.errors import ArtifactError
from inferfleet.hub.manifest import ManifestEntry
from inferfleet.hub.verified import Record, file_digests


@dataclass(frozen=True)
class Checked:
    path: str
    size: int
    status: str  # ok | missing | wrong-size | wrong-hash
    method: str  # stat | record | sha256 | gitsha1
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def verify_files(
    folder: Path,
    entries: tuple[ManifestEntry, ...] | list[ManifestEntry],
    *,
    full: bool = False,
    jobs: int | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> list[Checked]:
    """Check every declared file; returns one result per entry, sorted by path."""
    record = Record(folder)
    results: list[Checked] = []
    to_hash: list[tuple[ManifestEntry, os.stat_result, str, str]] = []
    for entry in entries:
        try:
            st = (folder / entry.path).stat()
        except FileNotFoundError:
            results.append(Checked(entry.path, entry.size, "missing", "stat", "not on disk"))
            continue
        if st.st_size != entry.size:
            results.append(
                Checked(
                    entry.path,
                    entry.size,
                    "wrong-size",
                    "stat",
                    f"{st.st_size:,} bytes on disk, {entry.size:,} declared",
                )
            )
            continue
        kind, expected = _expected(entry, record, st)
        if kind == "stat":
            results.append(Checked(entry.path, entry.size, "ok", "stat"))
        elif not full and record.vouches(
            entry.path,
            st,
            sha256=expected if kind == "sha256" else None,
            gitsha1=expected if kind == "gitsha1" else None,
        ):
            results.append(Checked(entry.path, entry.size, "ok", "record"))
        else:
            to_hash.append((entry, st, kind, expected))
    workers = max(1, min(jobs or os.cpu_count() or 1, len(to_hash) or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="inferfleet-verify") as pool:
        hashed = list(pool.map(lambda item: _hash_one(folder, item, on_bytes), to_hash))
    for (entry, st, kind, _expected_value), (checked, digest) in zip(to_hash, hashed, strict=True):
        results.append(checked)
        if checked.ok:
            record.put(
                entry.path,
                st,
                sha256=digest if kind == "sha256" else None,
                gitsha1=digest if kind == "gitsha1" else None,
            )
        else:
            record.forget(entry.path)
    return sorted(results, key=lambda c: c.path)


def _expected(entry: ManifestEntry, record: Record, st: os.stat_result) -> tuple[str, str]:
    if entry.sha256 is not None:
        return "sha256", entry.sha256
    if entry.gitsha1 is not None:
        return "gitsha1", entry.gitsha1
    if entry.kind == "parts":
        # Hashed when it was assembled from verified fragments.
        recorded = record.recorded_sha256(entry.path)
        if recorded is not None:
            return "sha256", recorded
    return "stat", ""


def _hash_one(
    folder: Path,
    item: tuple[ManifestEntry, os.stat_result, str, str],
    on_bytes: Callable[[int], None] | None,
) -> tuple[Checked, str]:
    entry, _st, kind, expected = item
    digests = file_digests(
        folder / entry.path, size=entry.size, git=kind == "gitsha1", on_bytes=on_bytes
    )
    digest = digests.gitsha1 if kind == "gitsha1" else digests.sha256
    if digest == expected:
        return Checked(entry.path, entry.size, "ok", kind), digest
    detail = f"{kind} {digest}, declared {expected}"
    return Checked(entry.path, entry.size, "wrong-hash", kind, detail), digest


def raise_for_problems(folder: Path, results: list[Checked]) -> None:
    bad = [c for c in results if not c.ok]
    if not bad:
        return
    listing = "; ".join(f"{c.path}: {c.status} ({c.detail})" for c in bad)
    raise ArtifactError(
        f"{len(bad)} of {len(results)} declared file(s) in {folder} failed verification: {listing}",
        hint="run `inferfleet models fetch NAME` to fetch them again; a verified file is "
        "not downloaded twice",
        where=str(folder),
    )
