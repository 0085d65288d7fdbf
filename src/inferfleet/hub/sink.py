"""The writing end of a download: append to the partial file and hash, in a thread.

The receiving thread hands over pieces of at most 64 KiB through a queue of
two; a writer thread appends them and feeds the hashes (hashlib and
``os.write`` release the GIL, so hashing overlaps receiving). At most
:data:`CHUNK` bytes of a file are ever received and not yet written: that
is all a ``kill -9`` can lose, and the next run re-hashes the prefix on disk.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

from inferfleet.hub.errors import FetchError, HubError

_PIECE = 64 << 10  # bytes handed to the writer thread at once (at most)
_QUEUED = 2  # pieces waiting for the writer
# The most bytes of one file received and not yet written, at any moment: the
# pieces queued, the one being written and the one being handed over.
CHUNK = _PIECE * (_QUEUED + 2)
_REHASH = 4 << 20


class Cancelled(Exception):
    """The user interrupted the fetch; the partial file is kept for the next run."""


class Sink:
    """Appends to the partial and hashes, in a thread of its own.

    The file is created on the first byte, so an answer that is refused
    before its body (L-01) leaves nothing behind.
    """

    def __init__(self, path: Path, *, size: int, git: bool, start: int) -> None:
        self.path = path
        self.size = size
        self.git = git  # the git blob id costs a second hash pass: non-LFS files only
        self.received = start  # bytes fed; on disk once flush() returns
        self._fd: int | None = None
        self._thread: threading.Thread | None = None
        self._queue: queue.Queue[memoryview | None] = queue.Queue(maxsize=_QUEUED)
        self._error: BaseException | None = None
        self._hashers()
        if start:
            self._open(start)

    def _hashers(self) -> None:
        self.sha256 = hashlib.sha256()
        header = f"blob {self.size}\0".encode()
        self.gitsha1 = hashlib.sha1(header, usedforsecurity=False)

    def _open(self, start: int) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.ftruncate(self._fd, start)
        os.lseek(self._fd, start, os.SEEK_SET)
        self._thread = threading.Thread(target=self._run, name="inferfleet-sink", daemon=True)
        self._thread.start()

    def rehash(self, *, cancelled: Callable[[], bool], on_bytes: Callable[[int], None]) -> None:
        """Hash the prefix already on disk (a new process lost the hash state)."""
        if self.received == 0:
            return
        with self.path.open("rb") as handle:
            left = self.received
            while left > 0:
                if cancelled():
                    raise Cancelled
                block = handle.read(min(_REHASH, left))
                if not block:
                    raise HubError(f"{self.path} shrank while it was read", hint="run again")
                self.sha256.update(block)
                if self.git:
                    self.gitsha1.update(block)
                left -= len(block)
                on_bytes(len(block))

    def feed(self, data: bytes) -> None:
        if self._fd is None:
            self._open(0)
        self._raise_error()
        view = memoryview(data)
        for at in range(0, len(view), _PIECE):
            self._queue.put(view[at : at + _PIECE])
        self.received += len(data)

    def _raise_error(self) -> None:
        if self._error is None:
            return
        if isinstance(self._error, OSError):
            raise FetchError(
                f"cannot write {self.path}: {self._error.strerror or self._error}",
                hint="free some space or fix the model dir's permissions, then run again: "
                "what is on disk is kept and resumed",
            ) from self._error
        raise self._error

    def flush(self) -> None:
        """Everything fed so far is written (to the page cache) when this returns."""
        if self._fd is None:
            return
        self._queue.join()
        self._raise_error()

    def reset(self) -> None:
        """Back to an empty file: a 200 answered our Range, or the bytes were wrong."""
        self.flush()
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.lseek(self._fd, 0, os.SEEK_SET)
        self.received = 0
        self._hashers()

    def sync(self) -> None:
        """Flush and fsync; creates the file if no byte came (a declared empty file)."""
        if self._fd is None:
            self._open(0)
        self.flush()
        assert self._fd is not None
        os.fsync(self._fd)

    def close(self) -> None:
        """Stop the writer and close the file (idempotent; keeps what was written)."""
        if self._fd is None:
            return
        try:
            self.flush()
        finally:
            assert self._thread is not None
            self._queue.put(None)
            self._thread.join()
            os.close(self._fd)
            self._fd = None

    def _run(self) -> None:
        while True:
            block = self._queue.get()
            try:
                if block is None:
                    return
                if self._error is None and self._fd is not None:
                    view = block
                    while view:
                        view = view[os.write(self._fd, view) :]
                    self.sha256.update(block)
                    if self.git:
                        self.gitsha1.update(block)
            except BaseException as exc:  # noqa: BLE001 - handed to the feeding thread
                self._error = exc
            finally:
                self._queue.task_done()
