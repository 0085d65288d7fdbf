"""A manifest of files already on disk: ``models manifest DIR`` and offline Hub snapshots.

Every regular file under the folder (links followed, so a Hugging Face cache
snapshot lists its blobs under their repo paths) is declared with its exact
size (stat, L-08) and the sha256 of its bytes, hashed once (L-01). Hidden
files (``.git``, inferfleet's record, editor droppings) are left out.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from pathlib import Path

from inferfleet.artifacts.digests import file_digests
from inferfleet.artifacts.manifest import Manifest, ManifestEntry
from inferfleet.errors import UsageError


def folder_manifest(
    folder: Path,
    *,
    includes: Sequence[str] = (),
    repo: str | None = None,
    revision: str | None = None,
    commit: str | None = None,
) -> Manifest:
    """The manifest of ``folder``'s files (those the ``includes`` globs select, if any)."""
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a directory", hint="give a folder of model files")
    entries: list[ManifestEntry] = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if any(part.startswith(".") for part in rel.split("/")) or not path.is_file():
            continue
        if includes and not any(fnmatch.fnmatchcase(rel, glob) for glob in includes):
            continue
        size = path.stat().st_size
        entries.append(ManifestEntry(rel, size, "sha256", file_digests(path, size=size).sha256))
    if not entries:
        chosen = f" matching {' '.join(includes)}" if includes else ""
        raise UsageError(
            f"{folder} holds no file{chosen}",
            hint="give the folder that holds the model files (or fix --include)",
        )
    return Manifest(repo, revision, commit, tuple(entries))
