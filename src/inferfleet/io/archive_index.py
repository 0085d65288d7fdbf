"""The archive's index: what ``index.json`` of an entry holds, and the checks of what it names.

An index is hostile state (:mod:`inferfleet.io.archive` reads it with
:func:`~inferfleet.io.state_files.read_state`): :func:`index_problem` names
what pydantic cannot see (a relative path, a ``..`` part, a control
character, a duplicate, an impossible mode), and :func:`check_destination`
refuses to restore through a symlink.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from inferfleet.errors import FleetError
from inferfleet.text import unsafe_char

INDEX_VERSION = 1
# retire: a retired service's file; replace: a deploy wrote other bytes over it;
# overwrite: `archive restore --force` wrote an archived file over it.
REASONS = ("retire", "replace", "overwrite")
MAX_FILES = 256  # a service has a handful of files; more is not an index we wrote
# A restore gives back the permission bits only: never setuid, setgid or sticky,
# whatever a (possibly tampered) index records.
RESTORE_MODE_MASK = 0o777
MAX_COPY_BYTES = 64 << 20  # units, env and settings files: far below this
_SHA_RE = re.compile(r"[0-9a-f]{64}")


class ArchiveError(FleetError, OSError):
    """The archive cannot be read, written or restored from."""


@dataclass(frozen=True)
class ArchivedFile:
    path: str  # the original absolute path on the host
    mode: int  # its permission bits, given back on restore
    sha256: str
    size: int


@dataclass(frozen=True)
class ArchiveRestore:
    """One time files of an entry went back to the host (recorded in its index)."""

    when: str  # ISO 8601, UTC
    at: float
    paths: list[str]
    by: str  # apply (a rollback brought the service back) | archive restore
    by_revision: str = ""  # the revision of the apply that restored them


RESTORED_BY = ("apply", "archive restore")
MAX_RESTORES = 1000  # an entry restored more often than this is not an index we wrote


@dataclass(frozen=True)
class ArchiveIndex:
    """``index.json`` of one entry."""

    service: str
    revision: str  # the revision the files came from ("" when not known)
    reason: str  # one of REASONS
    when: str  # ISO 8601, UTC
    at: float  # the same instant, seconds since the epoch
    files: list[ArchivedFile]
    by_revision: str = ""  # the revision of the apply that archived them
    version: int = INDEX_VERSION
    restores: list[ArchiveRestore] = field(default_factory=list)  # oldest first


def path_problem(text: str) -> str | None:
    """Why ``text`` cannot be a path the archive keeps or restores to; None when it can."""
    pure = PurePosixPath(text)
    if not text.startswith("/"):
        return f"{text!r} is not an absolute path"
    if ".." in pure.parts:
        return f"{text!r} has a '..' part"
    found = unsafe_char(text)
    if found is not None:
        # Controls, C1, line separators and bidi overrides: a path shown in
        # `archive list` must read as the path that is written.
        return f"{text!r} has a control character ({found[1]})"
    if pure == PurePosixPath("/"):
        return "'/' is not a file"
    return None


def check_path(text: str, *, where: str) -> None:
    problem = path_problem(text)
    if problem is not None:
        raise ArchiveError(
            f"refusing to archive {problem}",
            where=where,
            hint="the deploy removes and replaces only absolute paths of files it installed; "
            "a marker or index naming another is damaged: move it aside",
        )


def index_problem(index: ArchiveIndex) -> str | None:
    """What the index says that cannot be true of one we wrote (a check for read_state)."""
    if index.reason not in REASONS:
        return f"reason {index.reason!r} is not one of {', '.join(REASONS)}"
    if not index.files or len(index.files) > MAX_FILES:
        return f"it lists {len(index.files)} files"
    seen: set[str] = set()
    for item in index.files:
        problem = path_problem(item.path)
        if problem is not None:
            return f"files: {problem}"
        if item.path in seen:
            return f"files: {item.path} is listed twice"
        seen.add(item.path)
        if not 0 <= item.mode <= 0o7777 or item.size < 0 or not _SHA_RE.fullmatch(item.sha256):
            return f"files: {item.path} has an impossible mode, size or sha256"
    if len(index.restores) > MAX_RESTORES:
        return f"it lists {len(index.restores)} restores"
    for done in index.restores:
        if done.by not in RESTORED_BY or not set(done.paths) <= seen:
            return "restores: one names a restorer or a file the entry does not have"
    return None


def check_destination(dest: Path, state_dir: Path | None = None) -> None:
    """A restore writes only to ``dest`` itself: no symlink in its folders, nor at it,
    and never into inferfleet's own state (``state_dir``: the archive, its indexes,
    markers and records), where one entry could overwrite another's index."""
    text = str(dest)
    problem = path_problem(text)
    if problem is None and state_dir is not None:
        state = Path(os.path.realpath(state_dir))
        real = Path(os.path.realpath(dest))
        if real == state or state in real.parents:
            problem = f"{text!r} lies in inferfleet's state folder {state_dir}"
    if problem is None:
        parent = dest.parent
        existing = parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if Path(os.path.realpath(existing)) != existing:
            problem = f"{text!r} lies under a symlink ({existing} -> {os.path.realpath(existing)})"
        elif dest.is_symlink():
            problem = f"{text!r} is a symlink"
        elif dest.exists() and not dest.is_file():
            problem = f"{text!r} is not a regular file"
    if problem is not None:
        raise ArchiveError(
            f"refusing to restore to {problem}; nothing was restored",
            where=text,
            hint="restore by hand after checking where that path leads",
        )
