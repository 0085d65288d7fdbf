"""Starting a process-backend server and holding it to its health gate (L-33, L-34, L-43).

The record a started process is filed under (so it is stopped by pid, never
by name), and the one start that stops what it started when the gate fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from inferfleet.backends import health as gate
from inferfleet.backends.process import ProcessBackend, container_of, owner_pids
from inferfleet.backends.records import ServiceRecord
from inferfleet.errors import FleetError
from inferfleet.render.frontdoor import FrontLaunch, Launch


def record_template(launch: Launch, *, runtime_version: str = "") -> ServiceRecord:
    """The record of a process about to start (pid and times are filled in by the backend)."""
    record = ServiceRecord(
        service=launch.name,
        host=launch.host,
        pid=0,
        create_time=0.0,
        argv=launch.argv,
        bind=launch.bind,
        port=launch.port,
        log="",
        started_at=0.0,
        spec_hash=launch.spec,
        health_path=launch.health_path,
        alias=launch.name,
        runtime_version=runtime_version,
    )
    if isinstance(launch, FrontLaunch):
        return record
    service = launch.service
    return replace(
        record,
        alias=service.model_id(launch.name),
        model=service.model or "",
        ctx_per_slot=service.ctx_per_slot or 0,
        parallel=service.parallel,
        extra={}
        if launch.container is None
        else {"container": launch.container, "podman": launch.argv[0]},
    )


def start_gated(
    backend: ProcessBackend,
    template: ServiceRecord,
    *,
    env: dict[str, str],
    timeout: float,
    on_state: Callable[[str, float], None] | None = None,
    then: Callable[[], None] | None = None,
    tls: gate.TlsTarget | None = None,
) -> tuple[ServiceRecord, gate.HealthResult]:
    """Start a server, hold it to the health gate, and stop it again (by pid) on any failure.

    Green only when the server's own process answers (L-33) within the
    service's timeout (L-34); ``then`` runs further checks while the server is
    still ours to stop. Nothing that nobody owns is left running (L-43).
    """
    name = template.service
    record, proc = backend.start(template, env=env)
    try:
        health = gate.wait_healthy(
            proc,
            service=name,
            bind=record.bind,
            port=record.port,
            path=record.health_path,
            timeout=timeout,
            log_path=Path(record.log),
            on_state=on_state,
            tls=tls,
            owners=(lambda: owner_pids(record)) if container_of(record) else None,
        )
        if then is not None:
            then()
    except (FleetError, KeyboardInterrupt):
        backend.stop(name)
        raise
    record = replace(record, healthy_after_s=round(health.seconds, 3))
    backend.records.write(record)
    return record, health
