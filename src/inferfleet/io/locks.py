"""File locks: a kernel ``flock`` on a file, and a record of who holds it.

The kernel drops the lock when its process ends, so a crashed or killed run
never leaves a stale lock behind. Who holds it is written, atomically, to a
record beside it (``<lock>.json``): the locked file itself must keep its
inode, since a rename over it would hand a second run a fresh, unlocked file.
A record whose process is gone (pid + create time, :mod:`inferfleet.io.pids`)
names no holder. The deploy's host and service locks (deploy/lock.py) and
the one-fetch-per-model-dir lock (hub/fetch.py) are this one lock.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Self

from inferfleet.errors import FleetError
from inferfleet.io import pids
from inferfleet.io.files import atomic_write
from inferfleet.io.state_files import read_state

_POLL_S = 0.1


class LockedError(FleetError, BlockingIOError):
    """Another process holds this lock."""


class _DamagedRecord(FleetError):
    """A holder record that cannot be read (it only loses the holder's description)."""


@dataclass(frozen=True)
class Holder:
    pid: int
    user: str
    machine: str
    origin: str  # the ssh client's address, or "local"
    since: float
    what: str
    create_time: float = 0.0  # of the holding process: a pid alone may be reused
    # Its identity no clock step moves (io/pids.py); empty in a record written before.
    since_boot: float = 0.0
    boot_id: str = ""

    def describe(self, now: float | None = None) -> str:
        age = (now if now is not None else time.time()) - self.since
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.since))
        via = "" if self.origin == "local" else f" (connected from {self.origin})"
        return (
            f"{self.what} by {self.user}@{self.machine}{via}, pid {self.pid}, "
            f"since {stamp} ({age:.0f} s ago)"
        )


def current_holder_fields(what: str) -> Holder:
    client = os.environ.get("SSH_CLIENT", "").split()
    born = pids.own_birth()
    return Holder(
        pid=os.getpid(),
        user=getpass.getuser(),
        machine=socket.gethostname(),
        origin=client[0] if client else "local",
        since=time.time(),
        what=what,
        create_time=pids.own_create_time(),
        since_boot=0.0 if born is None else born.since_boot,
        boot_id="" if born is None else born.boot_id,
    )


class FileLock:
    """A kernel lock on ``path``; ``name`` says what it guards in messages.

    :meth:`acquire` fails at once by default (a second deploy of a host is a
    mistake to report, not to queue); with ``wait`` it waits that long for
    the holder to finish, telling ``on_wait`` once who it waits for. A
    subclass names its kind of subject and the error a held lock raises.
    """

    subject_kind = "file"
    error: type[FleetError] = LockedError

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        self._handle: IO[str] | None = None

    @property
    def subject(self) -> str:
        return f"{self.subject_kind} {self.name}"

    @property
    def record_path(self) -> Path:
        """Who holds the lock: written after it is taken, removed before it is let go."""
        return self.path.with_name(self.path.name + ".json")

    def acquire(
        self,
        what: str,
        *,
        wait: float = 0.0,
        on_wait: Callable[[str], None] = lambda _text: None,
    ) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        deadline = time.monotonic() + wait
        told = False
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = self._read_record()
                who = holder.describe() if holder is not None else "another process"
                if time.monotonic() >= deadline:
                    handle.close()
                    waited = f" (waited {wait:.0f} s)" if wait > 0 else ""
                    raise self.error(
                        f"{self.subject} is locked by {who}{waited}",
                        where=str(self.path),
                        hint="wait for that run to finish and run this one again; the lock "
                        "goes away by itself when its process ends",
                    ) from None
                if not told:
                    on_wait(f"waiting for the lock of {self.subject}, held by {who}")
                    told = True
                time.sleep(_POLL_S)
        self._handle = handle
        try:
            atomic_write(self.record_path, json.dumps(asdict(current_holder_fields(what))) + "\n")
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        if self._handle is None:
            return
        self.record_path.unlink(missing_ok=True)
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None

    def holder(self) -> Holder | None:
        """Who holds the lock now (None when it is free).

        Read from the record without touching the lock itself: a probe with
        ``flock`` could make a deploy starting at that instant fail.
        """
        holder = self._read_record()
        if holder is None:
            return None
        # The kernel lock died with its process; a leftover record is not a holder.
        born = pids.Birth.recorded(holder.since_boot, holder.boot_id)
        return holder if pids.same_process(holder.pid, holder.create_time, born) else None

    def _read_record(self) -> Holder | None:
        """The holder's record; None when absent or damaged.

        The kernel lock, not this record, decides who holds it: a damaged
        record (a crash between create and rename cannot leave one, but an
        editor or a full disk can) only loses the holder's description.
        """
        try:
            return read_state(
                self.record_path,
                Holder,
                what="lock record",
                error=_DamagedRecord,
                hint="",
                check=lambda h: None if h.pid > 0 else f"pid {h.pid} is not a process id",
            )
        except _DamagedRecord:
            return None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()
