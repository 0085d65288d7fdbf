"""Service records: what the process backend started, kept in the state dir.

A record is the only way we find a server again: pid plus the process's
start (a pid alone may by now belong to an unrelated process; the start is
kept as the kernel counts it, see :mod:`inferfleet.io.pids`), argv, port
and log. Written with :func:`~inferfleet.io.files.atomic_write`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inferfleet.errors import BackendError
from inferfleet.io.pids import Birth
from inferfleet.io.state_files import StateFolder

RECORD_VERSION = 1


@dataclass(frozen=True)
class ServiceRecord:
    service: str
    host: str
    pid: int
    create_time: float
    argv: list[str]
    bind: str
    port: int
    log: str
    started_at: float
    spec_hash: str
    health_path: str = "/health"
    alias: str = ""
    model: str = ""
    ctx_per_slot: int = 0
    parallel: int = 1
    runtime_version: str = ""
    healthy_after_s: float | None = None
    extra: dict[str, str] = field(default_factory=dict)
    version: int = RECORD_VERSION
    # Its identity no clock step moves (io/pids.py); empty in a record written before.
    since_boot: float = 0.0
    boot_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def born(self) -> Birth | None:
        return Birth.recorded(self.since_boot, self.boot_id)


class RecordStore(StateFolder[ServiceRecord]):
    """One JSON file per service under ``<state dir>/services``.

    A damaged record (not JSON, or JSON of the wrong shape) is a
    :class:`BackendError` naming the file: a record is how a server is found
    and stopped again, so it is never guessed at.
    """

    shape = ServiceRecord
    subfolder = "services"
    what = "service record"
    error = BackendError

    def hint(self, path: Path) -> str:
        return (
            f"find the server by its port (ss -ltnp) and stop it by pid if it still "
            f"runs, then delete {path}"
        )

    def problem(self, value: ServiceRecord) -> str | None:
        return _record_problem(value)


def _record_problem(record: ServiceRecord) -> str | None:
    if record.pid <= 0:
        return f"pid {record.pid} is not a process id"
    if not 0 < record.port < 65536:
        return f"port {record.port} is not a TCP port"
    return None
