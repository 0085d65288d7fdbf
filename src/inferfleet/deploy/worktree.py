"""The fleet as it is on disk here: what ``up`` applies, without git.

``up`` is ``apply`` on this machine: the same launch, gates, actions,
executor and markers. What it lacks is a committed revision, so its inputs
come from the working tree: in a clean git checkout they are exactly the
committed ones (revision = HEAD, so a later ``apply`` of that revision finds
nothing changed); anywhere else the revision is recorded as ``untracked``
and file inputs are git blob ids computed from the files on disk, which
equal the committed ones once the same bytes are committed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.inputs import FleetAtRevision, fleet_inputs
from inferfleet.errors import FleetError
from inferfleet.fleetfile.loader import LoadedFleet

UNTRACKED = "untracked"
# Outside a repository, the fleet file's folder is listed for `paths:` globs;
# a folder this large is not a fleet repository (say, a home directory).
MAX_LISTED = 20_000


class WorkingTreeBlobs(Mapping[str, str]):
    """Repository path -> git blob id of the file on disk, computed on first read."""

    def __init__(self, base: Path, paths: list[str]) -> None:
        self.base = base
        self._paths = set(paths)
        self._ids: dict[str, str] = {}

    def __getitem__(self, path: str) -> str:
        if path not in self._paths:
            raise KeyError(path)
        if path not in self._ids:
            self._ids[path] = blob_id((self.base / path).read_bytes())
        return self._ids[path]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._paths))

    def __len__(self) -> int:
        return len(self._paths)


def blob_id(data: bytes) -> str:
    """The id git gives these bytes as a blob (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def fleet_here(loaded: LoadedFleet) -> FleetAtRevision:
    """The fleet file as it is on disk, with every service's inputs."""
    repo = _repo_of(loaded.path)
    if repo is not None:
        fleet_path = repo.relative(loaded.path)
        head = repo.resolve("HEAD")
        if head is not None and not repo.dirty():
            blobs: Mapping[str, str] = repo.blobs(head)
            return FleetAtRevision(
                head, loaded.fleet, fleet_path, fleet_inputs(loaded.fleet, fleet_path, blobs), blobs
            )
        listed = repo.git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        paths = [p for p in listed.split("\0") if p and (repo.root / p).is_file()]
        blobs = WorkingTreeBlobs(repo.root, paths)
    else:
        fleet_path = loaded.path.name
        blobs = WorkingTreeBlobs(loaded.root, _listing(loaded.root))
    return FleetAtRevision(
        UNTRACKED, loaded.fleet, fleet_path, fleet_inputs(loaded.fleet, fleet_path, blobs)
    )


def _repo_of(path: Path) -> Repo | None:
    try:
        return Repo.containing(path)
    except FleetError:
        return None  # not in a repository, or no git here: the fleet is untracked


def _listing(base: Path) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel = Path(folder).relative_to(base)
        for name in sorted(files):
            found.append((rel / name).as_posix())
            if len(found) >= MAX_LISTED:
                return found
    return found
