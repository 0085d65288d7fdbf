"""Model folders for the artifacts tests: real files, their real hashes, a Model over them."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from inferfleet.fleetfile.fleet import Model


def write_file(folder: Path, name: str, data: bytes) -> dict[str, Any]:
    """Write ``folder/name`` and return its inline ``files:`` entry (path, size, sha256)."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"path": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def path_model(folder: Path, files: list[dict[str, Any]], **extra: Any) -> Model:
    return Model.model_validate({"source": {"path": str(folder)}, "files": files, **extra})


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
