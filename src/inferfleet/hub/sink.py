"""The writing end of a download: append to the partial file at once, hash in a thread.

Each piece the socket delivers is written to the partial file before the
next one is read, so a ``kill -9`` loses at most the piece in hand
(:data:`CHUNK` bounds it) and the next run resumes from what is on disk,
re-hashing that prefix. Hashing is off the receiving thread and in large
batches: the pieces (immutable ``bytes``, kept by reference, never copied)
are handed to a hashing thread about 4 MiB at a time, and hashlib releases
the GIL while it works, so receiving, writing and hashing overlap. One
hand-over per batch, not per piece: a queue and a thread wake-up per
64 KiB piece cost more than the hash itself.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

from inferfleet.artifacts.digests import Digests, Hashers, hash_into
from inferfleet.hub.errors import FetchError

_BATCH = 4 << 20  # bytes handed to the hashing thread at once
_QUEUED = 2  # batches waiting for the hashing thread (memory: about 3 x _BATCH)
_BUFFER = 1 << 20  # one socket read when the body is read directly (Sink.fill)
_BUFFERS = 4  # such buffers per file: one being filled, the rest being hashed or queued
Piece = bytes | bytearray | memoryview
# The most bytes of one file received and not yet written, at any moment: the
# piece in hand: one socket read (64 KiB through httpx, at most _BUFFER directly).
CHUNK = _BUFFER


class Cancelled(Exception):
    """The user interrupted the fetch; the partial file is kept for the next run."""


class Sink:
    """Appends to the partial at once and hashes, in a thread of its own, in batches.

    The file is created on the first byte, so an answer that is refused
    before its body (L-01) leaves nothing behind.
    """

    def __init__(self, path: Path, *, size: int, git: bool, start: int) -> None:
        self.path = path
        self.size = size
        self.git = git  # the git blob id costs a second hash pass: non-LFS files only
        self.received = start  # bytes written (to the page cache) so far
        self.hashers = Hashers(size, git=git)
        self._fd: int | None = None
        self._thread: threading.Thread | None = None
        # Batches to hash, each with the sink buffer to free once hashed (None: pieces).
        self._queue: queue.Queue[tuple[list[Piece], memoryview | None] | None] = queue.Queue(
            maxsize=_QUEUED + _BUFFERS
        )
        self._free: queue.Queue[memoryview] = queue.Queue()
        self._buffers = 0  # allocated so far, at most _BUFFERS
        self._pending: list[Piece] = []
        self._pending_bytes = 0
        self._error: BaseException | None = None
        if start:
            self._open(start)

    def _open(self, start: int) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, start)
            os.lseek(fd, start, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._thread = threading.Thread(target=self._run, name="inferfleet-hash", daemon=True)
        self._thread.start()

    def rehash(self, *, cancelled: Callable[[], bool], on_bytes: Callable[[int], None]) -> None:
        """Hash the prefix already on disk (a new process lost the hash state)."""
        if self.received == 0:
            return
        done = hash_into(
            self.hashers, self.path, limit=self.received, on_bytes=on_bytes, cancelled=cancelled
        )
        if done < self.received:
            raise Cancelled

    def _write(self, data: Piece) -> None:
        assert self._fd is not None
        try:
            written = os.write(self._fd, data)
            if written < len(data):
                view = memoryview(data)
                while written < len(data):
                    written += os.write(self._fd, view[written:])
        except OSError as exc:
            raise FetchError(
                f"cannot write {self.path}: {exc.strerror or exc}",
                hint="free some space or fix the model dir's permissions, then run again: "
                "what is on disk is kept and resumed",
                where=str(self.path),
            ) from exc

    def feed(self, data: Piece) -> None:
        """Write ``data`` (on disk when this returns) and queue it for hashing."""
        if self._fd is None:
            self._open(0)
        self._write(data)
        self.received += len(data)
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= _BATCH:
            self._hand_over()

    def fill(self, read_into: Callable[[memoryview], int], limit: int) -> int:
        """One ``read_into`` (a socket's ``recv_into``) of at most ``limit`` bytes, written.

        The bytes land in one of the sink's own buffers, are written, and the
        buffer goes to the hashing thread, which frees it when it is hashed:
        no copy in Python at all. Returns the count; 0 when the peer closed.
        """
        if self._fd is None:
            self._open(0)
        self._hand_over()  # pieces fed before go to the hash first, in order
        buffer = self._take_buffer()
        try:
            count = read_into(buffer[: min(len(buffer), limit)])
            if count:
                self._write(buffer[:count])
        except BaseException:
            self._free.put(buffer)
            raise
        if not count:
            self._free.put(buffer)
            return 0
        self.received += count
        self._queue.put(([buffer[:count]], buffer))
        return count

    def _take_buffer(self) -> memoryview:
        if self._buffers < _BUFFERS and self._free.empty():
            self._buffers += 1
            return memoryview(bytearray(_BUFFER))
        return self._free.get()

    def _hand_over(self) -> None:
        self._raise_error()
        if self._pending:
            self._queue.put((self._pending, None))
            self._pending = []
            self._pending_bytes = 0

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def flush(self) -> None:
        """Every byte fed so far is hashed when this returns."""
        if self._fd is None:
            return
        self._hand_over()
        self._queue.join()
        self._raise_error()

    def digests(self) -> Digests:
        """The hashes of everything fed (and rehashed) so far."""
        self.flush()
        return self.hashers.digests()

    def reset(self) -> None:
        """Back to an empty file: a 200 answered our Range, or the bytes were wrong."""
        self.flush()
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.lseek(self._fd, 0, os.SEEK_SET)
        self.received = 0
        self.hashers = Hashers(self.size, git=self.git)

    def sync(self) -> None:
        """Flush and fsync; creates the file if no byte came (a declared empty file)."""
        if self._fd is None:
            self._open(0)
        self.flush()
        assert self._fd is not None
        os.fsync(self._fd)

    def close(self) -> None:
        """Stop the hashing thread and close the file (idempotent; keeps what was written)."""
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
            item = self._queue.get()
            try:
                if item is None:
                    return
                batch, buffer = item
                if self._error is None:
                    self.hashers.update_all(batch)
                if buffer is not None:
                    self._free.put(buffer)
            except BaseException as exc:  # noqa: BLE001 - handed to the feeding thread
                self._error = exc
            finally:
                self._queue.task_done()
