"""Atomic file writes: a reader sees the old file or the new one, never a torn one.

Every record, marker, lock, state file and rendered artifact is written
here: a temp file in the same directory (so the rename stays on one file
system), flushed and fsynced, renamed over the target, and the directory
fsynced so the rename itself survives a crash. On any error the temp file is
removed and the target is untouched.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically; ``mode`` sets the permission bits."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    folder = path.parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    # Not every file system lets a directory be opened or fsynced; the data
    # itself is already safe, only the rename's durability is best effort.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
