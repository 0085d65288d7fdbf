"""The per-host deploy lock: one deploy at a time per host, the second one fails at once.

A kernel ``flock`` on a file in the checkout's git directory (one checkout
per host, and untouched by pulls or ``git clean``). The kernel drops the lock
when its process ends, so a crashed or killed deploy never leaves a stale
lock behind; the file's content only says who holds it, for the error.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

import psutil

from inferfleet.deploy.errors import LockHeldError

LOCK_NAME = "inferfleet-deploy.lock"


@dataclass(frozen=True)
class Holder:
    pid: int
    user: str
    machine: str
    origin: str  # the ssh client's address, or "local"
    since: float
    what: str

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
    )


class HostLock:
    def __init__(self, path: Path, host: str) -> None:
        self.path = path
        self.host = host
        self._handle: IO[str] | None = None

    def acquire(self, what: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _parse(handle)
            handle.close()
            who = holder.describe() if holder is not None else "another process"
            raise LockHeldError(
                f"host {self.host} is locked by {who}",
                where=str(self.path),
                hint="wait for that deploy to finish and run this one again; the lock goes "
                "away by itself when its process ends",
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(asdict(current_holder_fields(what))))
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        if self._handle is None:
            return
        with contextlib.suppress(OSError):
            self._handle.seek(0)
            self._handle.truncate()
            self._handle.flush()
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None

    def holder(self) -> Holder | None:
        """Who holds the lock now (None when it is free).

        Read from the file without touching the lock itself: a probe with
        ``flock`` could make a deploy starting at that instant fail.
        """
        try:
            with self.path.open("r", encoding="utf-8") as handle:
                holder = _parse(handle)
        except FileNotFoundError:
            return None
        if holder is None:
            return None
        try:
            # The kernel lock died with its process; a leftover record is not a holder.
            alive = psutil.Process(holder.pid).create_time() <= holder.since + 1.0
        except psutil.NoSuchProcess:
            alive = False
        return holder if alive else None

    def __enter__(self) -> HostLock:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _parse(handle: IO[str]) -> Holder | None:
    try:
        handle.seek(0)
        return Holder(**json.loads(handle.read()))
    except (OSError, ValueError, TypeError):
        return None
