"""The ``process`` backend: services as detached local processes.

Used for local development and the embedded default (systemd and Quadlet
backends share the same record/gate logic). A service is started in its own
session with its output in a log file, recorded (pid + create time + argv +
port), and stopped by that pid only: SIGTERM, then SIGKILL after a grace
period (L-43). A record whose pid now belongs to another process is stale and
that process is never signalled.

A start that dies between spawning the server and writing its record (an
apply killed with SIGKILL) would leave a server no record names, holding the
port against every later start. So a start first writes its intent
(``<state_dir>/starting/<service>.json``: a random token) and gives the
server that token in its environment (``INFERFLEET_START``); the record
replaces the intent. The next stop or start of the service finds an intent
left behind, stops the processes carrying its token (they are the ones
inferfleet started, L-43: never one found by name or port) and removes it.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from inferfleet.backends import podman
from inferfleet.backends.ports import Listener, listeners
from inferfleet.backends.records import RecordStore, ServiceRecord
from inferfleet.errors import BackendError, PortInUseError
from inferfleet.io import pids, process
from inferfleet.io.files import atomic_write
from inferfleet.io.state_files import read_state

START_TOKEN = "INFERFLEET_START"  # in a started server's environment, until it is recorded
STARTING = "starting"  # <state_dir>/starting/<service>.json: a start not yet recorded


@dataclass(frozen=True)
class StartIntent:
    service: str
    token: str
    since: float


class _DamagedIntent(BackendError):
    """An intent file that cannot be read (it only loses what it would have found)."""


@dataclass(frozen=True)
class StopResult:
    service: str
    outcome: str  # "terminated" | "killed" | "gone" | "stale" | "not-running"
    pid: int | None
    detail: str = ""


def alive(record: ServiceRecord) -> psutil.Process | None:
    """The recorded process if it still runs AND is the same process (its start)."""
    return pids.same_process(record.pid, record.create_time, record.born)


def container_of(record: ServiceRecord) -> tuple[str, str] | None:
    """(podman, container name) of a server that podman runs in a container, else None."""
    name = record.extra.get("container", "")
    return (record.extra.get("podman", "podman"), name) if name else None


def owner_pids(record: ServiceRecord) -> set[int]:
    """Processes besides the recorded pid's family that may hold its port: the labelled
    container's conmon and server (L-33); none for a plain process."""
    found = container_of(record)
    if found is None:
        return set()
    return podman.owner_pids(*found, record.service)


class ProcessBackend:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.records = RecordStore(state_dir)
        self.logs = state_dir / "logs"

    def log_path(self, service: str) -> Path:
        return self.logs / f"{service}.log"

    def port_holders(self, port: int, bind: str) -> list[Listener]:
        return listeners(port, bind)

    def start(
        self,
        record_fields: ServiceRecord,
        *,
        env: Mapping[str, str],
    ) -> tuple[ServiceRecord, psutil.Process]:
        """Start ``record_fields.argv``; refuses a port held by anyone (L-35)."""
        if self.reclaim(record_fields.service):
            self._wait_port_free(record_fields, 10.0)
        holders = self.port_holders(record_fields.port, record_fields.bind)
        if holders:
            raise PortInUseError(
                f"port {record_fields.port} is already held by {holders[0].describe()}",
                where=f"service {record_fields.service}",
                hint="stop that process (by its pid) or give the service another port; "
                "inferfleet never kills a process it did not start",
            )
        log = self.log_path(record_fields.service)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as handle:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            handle.write(
                f"--- inferfleet: starting at {stamp}: {' '.join(record_fields.argv)}\n".encode()
            )
        intent = StartIntent(record_fields.service, secrets.token_hex(16), time.time())
        self._intent_path(intent.service).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self._intent_path(intent.service), json.dumps(intent.__dict__) + "\n")
        proc = process.spawn_detached(
            record_fields.argv, log_path=log, env={**env, START_TOKEN: intent.token}
        )
        born = pids.birth(proc.pid)
        record = ServiceRecord(
            **{
                **record_fields.__dict__,
                "pid": proc.pid,
                "create_time": proc.create_time(),
                "since_boot": 0.0 if born is None else born.since_boot,
                "boot_id": "" if born is None else born.boot_id,
                "log": str(log),
                "started_at": time.time(),
            }
        )
        # Recorded before the health gate: a failed start can still be stopped by pid.
        self.records.write(record)
        self._intent_path(record.service).unlink(missing_ok=True)
        return record, proc

    def _intent_path(self, service: str) -> Path:
        return self.state_dir / STARTING / f"{service}.json"

    def reclaim(self, service: str, *, grace: float = 10.0) -> list[int]:
        """Stop the servers of a start that died before recording them; their pids.

        Only processes whose environment carries the intent's token are
        signalled (by pid): inferfleet started them for this service.
        """
        path = self._intent_path(service)
        try:
            intent = read_state(
                path,
                StartIntent,
                what="start intent",
                error=_DamagedIntent,
                hint="",
                check=lambda i: None if len(i.token) == 32 else "not a start token",
            )
        except _DamagedIntent:
            intent = None  # a torn intent cannot be: atomic_write; an edited one finds nothing
        if intent is None:
            path.unlink(missing_ok=True)
            return []
        stopped = []
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if proc.create_time() + 1 < intent.since:
                    continue  # started before the intent: not this start's
                if proc.environ().get(START_TOKEN) == intent.token:
                    process.terminate(proc, grace=grace)
                    stopped.append(proc.pid)
        path.unlink(missing_ok=True)
        return stopped

    def stop(self, service: str, *, grace: float = 10.0, port_wait: float = 10.0) -> StopResult:
        reclaimed = self.reclaim(service, grace=grace)
        record = self.records.read(service)
        if record is None and reclaimed:
            return StopResult(service, "terminated", reclaimed[0], "started, never recorded")
        if record is None:
            return StopResult(service, "not-running", None, "no record")
        process.reap(record.pid)  # ours and exited: reaped, not left a zombie
        proc = alive(record)
        if proc is None:
            _remove_container(record)  # left running by a killed podman (L-36)
            self.records.remove(service)
            detail = _stale_detail(record)
            return StopResult(service, "stale", record.pid, detail)
        outcome = process.terminate(proc, grace=grace)
        # podman passes the SIGTERM to the container and removes it (--rm) when it
        # exits; a podman killed after the grace leaves it running: removed here.
        _remove_container(record)
        self.records.remove(service)
        self._wait_port_free(record, port_wait)
        return StopResult(service, outcome, record.pid)

    def _wait_port_free(self, record: ServiceRecord, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.port_holders(record.port, record.bind):
                return
            time.sleep(0.05)
        holders = self.port_holders(record.port, record.bind)
        raise BackendError(
            f"service {record.service} stopped, but port {record.port} is still held by "
            f"{holders[0].describe()}",
            hint="another process took the port; stop it by pid before starting again",
        )


def _remove_container(record: ServiceRecord) -> None:
    """The service's container, if podman left it; one of that name that is not the
    service's (its label) is left alone (L-43)."""
    found = container_of(record)
    if found is None or not podman.present(found[0]):
        return
    now = podman.inspect(*found)
    if now is not None and now.owned_by(record.service):
        podman.remove_stale(*found, record.service)


def _stale_detail(record: ServiceRecord) -> str:
    try:
        other = psutil.Process(record.pid)
        return f"pid {record.pid} now belongs to another process ({other.name()}); left alone"
    except psutil.NoSuchProcess:
        return f"pid {record.pid} is gone"
