"""Atomic file writes: a reader sees the old file or the new one, never a torn one.

Every record, marker, lock, state file and rendered artifact is written
here: a temp file in the same directory (so the rename stays on one file
system), flushed and fsynced, renamed over the target, and the directory
fsynced so the rename itself survives a crash. On any error the temp file is
removed and the target is untouched.

Temp files are named ``.<name>.<pid>.<random>.tmp``: hidden, never matching
the ``*.json`` or ``*.service`` globs readers use, and carrying the writer's
pid. A writer killed with SIGKILL leaves its temp behind; the next successful
write of the same file removes every temp of that name whose writer is gone,
or that is older than :data:`STALE_TEMP_AGE` (a pid may be reused), and
keeps the in-flight temp of a writer that is still running.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

# A temp older than this is abandoned whoever wrote it: the files written
# here are small, so no live write takes minutes.
STALE_TEMP_AGE = 600.0
_DEFAULT_MODE = 0o644


def temp_prefix(path: Path) -> str:
    """The start of every temp name of ``path`` (``.<name>.<pid>.``)."""
    return f".{path.name}.{os.getpid()}."


def is_temp_of(path: Path, candidate: Path) -> bool:
    """Whether ``candidate`` is a temp file written on the way to ``path``."""
    return _temp_pid(path.name, candidate.name) is not None


def atomic_write(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically.

    ``mode`` sets the permission bits; without it an existing file keeps its
    bits and a new one gets 0644 (a record or marker is read by other tools
    and users, not only by us; secrets pass ``mode=0o600``).
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_writer(path, mode=mode) as handle:
        handle.write(payload)


@contextlib.contextmanager
def atomic_writer(path: Path, *, mode: int | None = None) -> Iterator[BinaryIO]:
    """A binary file that replaces ``path`` when the block ends without an error.

    For content too big to hold in memory (a file assembled from fragments);
    raising inside the block leaves ``path`` untouched and no temp behind.
    """
    folder = path.parent
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = _DEFAULT_MODE
    fd, tmp_name = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(folder)
    sweep_stale_temps(path)


def promote(done: Path, path: Path) -> None:
    """Rename a finished, fsynced file (a verified download) over ``path``, durably."""
    os.replace(done, path)
    _fsync_dir(path.parent)


def write_if_changed(path: Path, data: str | bytes, *, mode: int | None = None) -> bool:
    """:func:`atomic_write` unless ``path`` already holds ``data``; True when it wrote.

    An unchanged file still gets ``mode`` (a settings file left 0644 by hand
    becomes 0600 again), but that is not a change of content.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        same = path.read_bytes() == payload
    except FileNotFoundError:
        same = False
    if same:
        if mode is not None and path.stat().st_mode & 0o7777 != mode:
            os.chmod(path, mode)
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, payload, mode=mode)
    return True


def sweep_stale_temps(path: Path, *, now: float | None = None) -> list[Path]:
    """Remove temps of ``path`` left by dead writers or older than STALE_TEMP_AGE."""
    removed: list[Path] = []
    now = time.time() if now is None else now
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        pid = _temp_pid(path.name, entry.name)
        if pid is None:
            continue
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except FileNotFoundError:
            continue  # its writer renamed or removed it meanwhile
        if pid == os.getpid() and age < STALE_TEMP_AGE:
            continue  # another thread of ours may be writing it right now
        if age >= STALE_TEMP_AGE or not _pid_exists(pid):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


@contextlib.contextmanager
def staged_directory(dest: Path) -> Iterator[Path]:
    """A fresh folder beside ``dest``, renamed to ``dest`` when the block succeeds.

    ``dest`` must not exist or be empty. On any error the staging folder is
    removed and ``dest`` is left as it was: readers see no folder or the whole
    one. Staging folders are named like temp files (``.<name>.<pid>.<random>.tmp``).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=temp_prefix(dest), suffix=".tmp", dir=dest.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; what is staged is for reading
    try:
        yield staging
        if dest.is_dir():
            dest.rmdir()  # empty: a rename cannot replace a folder that has files
        os.replace(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _fsync_dir(dest.parent)


def _temp_pid(name: str, candidate: str) -> int | None:
    match = re.fullmatch(rf"\.{re.escape(name)}\.(\d+)\.[^.]+\.tmp", candidate)
    return int(match[1]) if match else None


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def _fsync_dir(folder: Path) -> None:
    # Not every file system lets a directory be opened or fsynced; the data
    # itself is already safe, only the rename's durability is best effort.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def private_dir(folder: Path, *, error: Callable[..., Exception], hint: str) -> Path:
    """``folder``, made if missing (mode 0700) and checked to be this user's alone.

    A real directory, not a symlink (a planted link in a shared /tmp would
    send our files where another user chose), owned by this user, with no
    access for group or others; anything else raises ``error(message,
    where=folder, hint=hint)``. The ssh control sockets and the trees
    ``deploy --dry-run`` exports live in one.
    """
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.lstat()
    except OSError as exc:
        raise error(
            f"{folder} cannot be used as a private folder: {exc.strerror or exc}",
            where=str(folder),
            hint=hint,
        ) from None
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        problem = "it is a symlink"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "it is not a directory"
    elif info.st_uid != os.getuid():
        problem = f"it belongs to uid {info.st_uid}"
    elif mode & 0o077:
        problem = f"mode {mode:o} lets others in"
    else:
        return folder
    raise error(
        f"{folder} is not a private folder of this user ({problem})", where=str(folder), hint=hint
    )
