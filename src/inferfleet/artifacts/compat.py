"""The old ``models.artifacts`` calls that ``deploy/local.py`` makes, over the new package.

Only ``deploy/local.py`` uses this module, until it calls
:func:`inferfleet.artifacts.verify.gate` and
:func:`inferfleet.artifacts.locate.main_path` itself; then this module goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inferfleet.artifacts import locate
from inferfleet.artifacts.manifest import ManifestEntry, declared_files
from inferfleet.artifacts.materialise import materialise
from inferfleet.artifacts.verify import OnBytes, raise_for_problems, verify_files
from inferfleet.errors import SpecError
from inferfleet.fleetfile.fleet import Model

__all__ = ["VerifiedFile", "declared_files", "main_file", "materialise", "verify"]


@dataclass(frozen=True)
class VerifiedFile:
    path: Path
    size: int
    sha256: str | None


def verify(
    folder: Path, files: list[ManifestEntry], *, on_bytes: OnBytes | None = None
) -> list[VerifiedFile]:
    """The verify gate over ``folder`` (FilesRejected on a problem), in the old result shape."""
    results = verify_files(folder, files, fail_fast=True, on_bytes=on_bytes)
    raise_for_problems(folder, results, total=len(files))
    return [VerifiedFile(folder / f.path, f.size, f.sha256) for f in files]


def main_file(model: Model, files: list[ManifestEntry]) -> str:
    """The main file, for callers that load GGUF files only."""
    main = locate.main_file(model, files)
    if main is None:
        raise SpecError(
            "the model has no .gguf file to load",
            hint="set the model's `main:` to the file the server should load",
        )
    return main
