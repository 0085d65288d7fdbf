"""Service records: what the process backend started, kept in the state dir.

A record is the only way we find a server again: pid plus the process's
start (a pid alone may by now belong to an unrelated process; the start is
kept as the kernel counts it, see :mod:`inferfleet.io.pids`), argv, port
and log. Written with :func:`~inferfleet.io.files.atomic_write`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from inferfleet.errors import BackendError
from inferfleet.io.files import atomic_write
from inferfleet.io.pids import Birth
from inferfleet.io.state_files import read_state

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

    @property
    def born(self) -> Birth | None:
        return Birth.recorded(self.since_boot, self.boot_id)


class RecordStore:
    """One JSON file per service under ``<state>/services``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, service: str) -> Path:
        return self.folder / f"{service}.json"

    def read(self, service: str) -> ServiceRecord | None:
        """The service's record, None when there is none.

        A damaged one (not JSON, or JSON of the wrong shape) is a
        :class:`BackendError` naming the file: a record is how a server is
        found and stopped again, so it is never guessed at.
        """
        path = self.path(service)
        return read_state(
            path,
            ServiceRecord,
            what="service record",
            error=BackendError,
            hint=f"find the server by its port (ss -ltnp) and stop it by pid if it still "
            f"runs, then delete {path}",
            check=_record_problem,
        )

    def write(self, record: ServiceRecord) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path(record.service), json.dumps(asdict(record), indent=2) + "\n")

    def remove(self, service: str) -> None:
        self.path(service).unlink(missing_ok=True)

    def names(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.glob("*.json"))


def _record_problem(record: ServiceRecord) -> str | None:
    if record.pid <= 0:
        return f"pid {record.pid} is not a process id"
    if not 0 < record.port < 65536:
        return f"port {record.port} is not a TCP port"
    return None
