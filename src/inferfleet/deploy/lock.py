"""The per-host deploy lock: one deploy at a time per host, the second one fails at once.

A kernel ``flock`` on a file in the checkout's git directory (one checkout
per host, and untouched by pulls or ``git clean``). The kernel drops the lock
when its process ends, so a crashed or killed deploy never leaves a stale
lock behind. Who holds it is written, atomically, to a record beside it
(``<lock>.json``): the locked file itself must keep its inode, since a
rename over it would hand a second deploy a fresh, unlocked file. A record
whose process is gone (pid + create time, :mod:`inferfleet.io.pids`) names
no holder.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from inferfleet.deploy.errors import LockHeldError
from inferfleet.io import pids
from inferfleet.io.files import atomic_write

LOCK_NAME = "inferfleet-deploy.lock"


@dataclass(frozen=True)
class Holder:
    pid: int
    user: str
    machine: str
    origin: str  # the ssh client's address, or "local"
    since: float
    what: str
    create_time: float = 0.0  # of the holding process: a pid alone may be reused

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
    return Holder(
        pid=os.getpid(),
        user=getpass.getuser(),
        machine=socket.gethostname(),
        origin=client[0] if client else "local",
        since=time.time(),
        what=what,
        create_time=pids.own_create_time(),
    )


class HostLock:
    def __init__(self, path: Path, host: str) -> None:
        self.path = path
        self.host = host
        self._handle: IO[str] | None = None

    @property
    def record_path(self) -> Path:
        """Who holds the lock: written after it is taken, removed before it is let go."""
        return self.path.with_name(self.path.name + ".json")

    def acquire(self, what: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            holder = self._read_record()
            who = holder.describe() if holder is not None else "another process"
            raise LockHeldError(
                f"host {self.host} is locked by {who}",
                where=str(self.path),
                hint="wait for that deploy to finish and run this one again; the lock goes "
                "away by itself when its process ends",
            ) from None
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
        return holder if pids.same_process(holder.pid, holder.create_time) else None

    def _read_record(self) -> Holder | None:
        try:
            return Holder(**json.loads(self.record_path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def __enter__(self) -> HostLock:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()
