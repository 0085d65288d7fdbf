"""Locks: one deploy at a time per host (the second fails at once), one change at a time
per service (the second waits).

Both are :class:`inferfleet.io.locks.FileLock`: the host's in the checkout's
git directory (one checkout per host, and untouched by pulls or ``git
clean``), a service's in the host's state dir.
"""

from __future__ import annotations

from pathlib import Path

from inferfleet.deploy.errors import LockHeldError
from inferfleet.io.locks import FileLock, Holder, current_holder_fields

__all__ = ["Holder", "HostLock", "ServiceLock", "current_holder_fields"]

LOCK_NAME = "inferfleet-deploy.lock"
SERVICE_LOCKS = "locks"  # <state_dir>/locks/<service>.lock
# How long up, down and apply wait for a service another run is changing:
# longer than any health gate, so a queued run ends with a clear outcome.
SERVICE_LOCK_WAIT_S = 1800.0


class HostLock(FileLock):
    """The deploy lock of ``host`` (a second deploy of a host fails at once)."""

    subject_kind = "host"
    error = LockHeldError

    @property
    def host(self) -> str:
        return self.name


class ServiceLock(HostLock):
    """One service's lock on its host: ``up``, ``down`` and ``apply`` change a service
    only while holding it, so two runs can never both start (or one stop while the
    other starts) a server and leave one that no record names.

    It lives in the host's state dir, beside the records it guards.
    """

    subject_kind = "service"

    def __init__(self, state_dir: Path, service: str) -> None:
        super().__init__(state_dir / SERVICE_LOCKS / f"{service}.lock", service)
