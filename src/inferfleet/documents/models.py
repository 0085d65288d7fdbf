"""Documents of ``models`` and ``archive``."""

from __future__ import annotations

from typing import (
    Literal,
    NotRequired,
)

from typing_extensions import TypedDict


class ManifestFile(TypedDict):
    path: str
    size: int
    kind: str  # sha256 | git-sha1 | parts
    hash: str


class ModelsManifestDocument(TypedDict):
    schema: Literal["inferfleet.models.manifest/v1"]
    repo: str
    revision: str
    commit: str | None  # the commit the revision pointed at, when the listing named it
    out: str | None
    files: list[ManifestFile]


class VerifiedFile(TypedDict):
    path: str
    size: int
    status: str
    method: str
    detail: str


class ModelsVerifyDocument(TypedDict):
    schema: Literal["inferfleet.models.verify/v1"]
    model: str
    folder: str
    ok: bool
    files: list[VerifiedFile]


class FetchedFile(TypedDict):
    path: str
    size: int
    status: str
    fetched: int
    reused: int
    seconds: float
    sha256: str | None


class FetchFailure(TypedDict):
    path: str
    error: str
    hint: str


class ModelsFetchDocument(TypedDict):
    schema: Literal["inferfleet.models.fetch/v1"]
    model: str
    repo: str
    commit: str
    folder: str
    ok: bool
    fetched_bytes: int
    reused_bytes: int
    seconds: float
    files: list[FetchedFile]
    failures: list[FetchFailure]


class ArchiveFileRow(TypedDict):
    path: str  # the original absolute path on the host
    mode: str  # octal permission bits, e.g. "0600"
    sha256: str
    size: int


class ArchiveEntryRow(TypedDict):
    entry: str  # the entry's name (what `archive restore` takes)
    folder: str
    service: str | None  # None when the index is damaged
    revision: str | None
    reason: str | None  # retire | replace | overwrite
    when: str  # ISO 8601, UTC (from the entry's name)
    bytes: int
    files: list[ArchiveFileRow]
    problem: str | None  # why the index cannot be trusted; None when it is sound
    restores: NotRequired[list[ArchiveRestoreRow]]  # when its files went back, oldest first


class ArchiveRestoreRow(TypedDict):
    when: str  # ISO 8601, UTC
    paths: list[str]
    by: str  # apply (a rollback brought the service back) | archive restore
    by_revision: str


class ArchiveListDocument(TypedDict):
    schema: Literal["inferfleet.archive.list/v1"]
    archive: str
    entries: list[ArchiveEntryRow]
    bytes: int


class ArchiveRestoredFile(TypedDict):
    path: str
    outcome: Literal["restored", "unchanged", "overwritten"]


class ArchiveRestoreDocument(TypedDict):
    schema: Literal["inferfleet.archive.restore/v1"]
    entry: str
    files: list[ArchiveRestoredFile]


class ArchivePruneDocument(TypedDict):
    schema: Literal["inferfleet.archive.prune/v1"]
    archive: str
    older_than: str
    cutoff: str  # ISO 8601, UTC: entries from before it are pruned
    dry_run: bool
    entries: list[str]  # pruned (or, with dry_run, that would be)
    freed_entries: int
    freed_bytes: int
