"""`up`, `down` and `status` for the services of this machine (process backend).

Facts -> plan -> apply, in small: read the record and the port, decide
(start, restart, leave alone), act, and gate on health before reporting.
Every step that can fail raises a FleetError saying what and how to fix it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil

from inferfleet import paths
from inferfleet.artifacts import compat as artifacts
from inferfleet.backends import health as gate
from inferfleet.backends.ports import owned_by
from inferfleet.backends.process import ProcessBackend, StopResult, alive
from inferfleet.backends.records import ServiceRecord
from inferfleet.errors import FleetError, RuntimeInstallError, UsageError
from inferfleet.fleetfile.fleet import Service
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.install import llamacpp_build
from inferfleet.io import http
from inferfleet.probe.minimal import Check, run_minimal
from inferfleet.runtimes import llamacpp


@dataclass
class Hooks:
    """How the CLI shows progress; every hook is optional."""

    note: Callable[[str], None] = lambda _text: None
    build_progress: Callable[[int, int, str], None] | None = None
    hash_progress: Callable[[int, int], Callable[[int], None]] | None = None
    health_state: Callable[[str, float], None] | None = None


@dataclass(frozen=True)
class UpResult:
    service: str
    action: str  # "started" | "restarted" | "unchanged"
    url: str
    pid: int
    model: str
    ctx_per_slot: int
    parallel: int
    seconds_to_healthy: float | None
    checks: list[Check] = field(default_factory=list)
    reason: str = ""


@dataclass(frozen=True)
class ServiceStatus:
    service: str
    host: str
    state: str  # healthy | loading | unhealthy | foreign | stale | stopped | remote
    url: str
    pid: int | None
    uptime_s: float | None
    model: str
    ctx_per_slot: int | None
    parallel: int
    runtime_version: str
    detail: str = ""


def local_services(loaded: LoadedFleet, only: str | None = None) -> list[str]:
    """Services of this machine (hosts whose address is loopback/localhost)."""
    fleet = loaded.fleet
    if only is not None:
        if only not in fleet.services:
            raise UsageError(
                f"no service named {only!r} in {loaded.path}",
                hint=f"known services: {', '.join(sorted(fleet.services)) or '(none)'}",
            )
        return [only]
    return [
        name for name, svc in fleet.services.items() if fleet.hosts[svc.host].is_local(svc.host)
    ]


def backend_for(loaded: LoadedFleet, service: Service) -> ProcessBackend:
    return ProcessBackend(paths.state_dir(loaded.fleet.hosts[service.host]))


# ---------------------------------------------------------------- preparation


@dataclass(frozen=True)
class Prepared:
    name: str
    service: Service
    argv: list[str]
    env: dict[str, str]
    spec_hash: str
    runtime_version: str
    model_name: str


def prepare(loaded: LoadedFleet, name: str, hooks: Hooks) -> Prepared:
    """Runtime present (built if missing), model verified (gate), argv computed."""
    fleet = loaded.fleet
    service = fleet.services[name]
    host = fleet.hosts[service.host]
    if not host.is_local(service.host):
        raise UsageError(
            f"service {name!r} runs on host {service.host!r}, not on this machine",
            hint="`up` starts the services of this machine; remote hosts are deployed over ssh",
        )
    if service.backend != "process" or service.kind != "llm":
        raise UsageError(
            f"service {name!r} uses the {service.backend} backend ({service.kind})",
            hint="`up` runs llm services with `backend: process`; set that for local use",
        )
    assert service.runtime is not None and service.model is not None
    runtime = fleet.runtimes[service.runtime]
    if runtime.kind != "llama.cpp":
        raise UsageError(
            f"service {name!r} uses a {runtime.kind} runtime; the process backend runs llama.cpp",
            hint="run vLLM and SGLang services as containers (backend: quadlet)",
        )
    binary = llamacpp_build.server_binary(runtime)
    version = ""
    if binary is None and runtime.source is not None:
        hooks.note(f"llama-server {runtime.source.version} is not built yet; building it once")
        record, _ = llamacpp_build.install(
            runtime.source, on_progress=hooks.build_progress, on_phase=hooks.note
        )
        binary, version = Path(record.binary), record.version_text
    elif binary is None:
        raise RuntimeInstallError(
            f"runtime {service.runtime!r}: binary {runtime.binary} does not exist",
            hint="fix the runtime's binary path, or give it a source to build from",
        )
    elif runtime.source is not None:
        done = llamacpp_build.installed(runtime.source)
        version = "" if done is None else done.version_text

    model = fleet.models[service.model]
    files = artifacts.declared_files(model, loaded.root)
    folder = artifacts.materialise(service.model, model, files, hooks.note)
    total = sum(f.size for f in files)
    on_bytes = None if hooks.hash_progress is None else hooks.hash_progress(total, len(files))
    verified = artifacts.verify(folder, files, on_bytes=on_bytes)
    main = folder / artifacts.main_file(model, files)

    argv = llamacpp.serve_argv(name, service, host, binary, main)
    env = llamacpp.environment(service, dict(os.environ))
    spec = {
        "argv": argv,
        "env": service.env,
        "files": [(v.path.name, v.size, v.sha256) for v in verified],
        "runtime": version or str(binary),
        "health": service.health.path,
    }
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    return Prepared(name, service, argv, env, digest, version, service.model)


# ---------------------------------------------------------------- up


def up(loaded: LoadedFleet, name: str, hooks: Hooks, *, contract: bool = True) -> UpResult:
    prepared = prepare(loaded, name, hooks)
    service = prepared.service
    backend = backend_for(loaded, service)
    url = gate.url_for(service.bind, service.port, "")
    assert service.ctx_per_slot is not None

    action = "started"
    reason = ""
    record = backend.records.read(name)
    if record is not None:
        proc = alive(record)
        if proc is None:
            backend.records.remove(name)  # stale: its pid is gone or reused; never signalled
        elif record.spec_hash == prepared.spec_hash and _healthy_now(record, proc):
            return UpResult(
                name,
                "unchanged",
                url,
                record.pid,
                prepared.model_name,
                service.ctx_per_slot,
                service.parallel,
                record.healthy_after_s,
                [],
                "already running with this spec",
            )
        else:
            reason = "spec changed" if record.spec_hash != prepared.spec_hash else "unhealthy"
            hooks.note(f"{name}: {reason}; restarting (pid {record.pid})")
            backend.stop(name)
            action = "restarted"

    template = record_template(
        name,
        service,
        argv=prepared.argv,
        spec_hash=prepared.spec_hash,
        model=prepared.model_name,
        runtime_version=prepared.runtime_version,
    )
    checks: list[Check] = []

    def contract_checks() -> None:
        assert service.ctx_per_slot is not None
        checks.extend(
            run_minimal(
                url, alias=service.alias or name, ctx_per_slot=service.ctx_per_slot, service=name
            )
        )

    record, health = start_gated(
        backend,
        template,
        env=prepared.env,
        timeout=service.health.timeout,
        hooks=hooks,
        then=contract_checks if contract else None,
    )
    return UpResult(
        name,
        action,
        url,
        record.pid,
        prepared.model_name,
        service.ctx_per_slot,
        service.parallel,
        health.seconds,
        checks,
        reason,
    )


def record_template(
    name: str,
    service: Service,
    *,
    argv: list[str],
    spec_hash: str,
    model: str,
    runtime_version: str = "",
) -> ServiceRecord:
    """The record of a process about to start (pid and times are filled in by the backend)."""
    return ServiceRecord(
        service=name,
        host=service.host,
        pid=0,
        create_time=0.0,
        argv=argv,
        bind=service.bind,
        port=service.port,
        log="",
        started_at=0.0,
        spec_hash=spec_hash,
        health_path=service.health.path,
        alias=service.alias or name,
        model=model,
        ctx_per_slot=service.ctx_per_slot or 0,
        parallel=service.parallel,
        runtime_version=runtime_version,
    )


def start_gated(
    backend: ProcessBackend,
    template: ServiceRecord,
    *,
    env: dict[str, str],
    timeout: float,
    hooks: Hooks,
    then: Callable[[], None] | None = None,
) -> tuple[ServiceRecord, gate.HealthResult]:
    """Start a server, hold it to the health gate, and stop it again (by pid) on any failure.

    Shared by ``up`` and ``apply``: green only when the server's own process
    answers (L-33) within the service's timeout (L-34); ``then`` runs further
    checks while the server is still ours to stop. Nothing that nobody owns is
    left running (L-43).
    """
    name = template.service
    record, proc = backend.start(template, env=env)
    hooks.note(f"{name}: started pid {proc.pid}; waiting for {template.health_path}")
    try:
        health = gate.wait_healthy(
            proc,
            service=name,
            bind=record.bind,
            port=record.port,
            path=record.health_path,
            timeout=timeout,
            log_path=Path(record.log),
            on_state=hooks.health_state,
        )
        if then is not None:
            then()
    except (FleetError, KeyboardInterrupt):
        backend.stop(name)
        raise
    record = replace(record, healthy_after_s=round(health.seconds, 3))
    backend.records.write(record)
    return record, health


def _healthy_now(record: ServiceRecord, proc: psutil.Process) -> bool:
    url = gate.url_for(record.bind, record.port, record.health_path)
    with http.client(timeout=3.0) as client:
        result = gate.probe(client, url)
    return result.state == "ok" and owned_by(record.port, record.bind, proc.pid)


# ---------------------------------------------------------------- down


def down(loaded: LoadedFleet, name: str, *, grace: float = 10.0) -> StopResult:
    service = loaded.fleet.services[name]
    return backend_for(loaded, service).stop(name, grace=grace)


# ---------------------------------------------------------------- status


def status(loaded: LoadedFleet, name: str) -> ServiceStatus:
    fleet = loaded.fleet
    service = fleet.services[name]
    url = gate.url_for(service.bind, service.port, "")

    def make(
        state: str,
        pid: int | None = None,
        uptime: float | None = None,
        version: str = "",
        detail: str = "",
    ) -> ServiceStatus:
        return ServiceStatus(
            service=name,
            host=service.host,
            state=state,
            url=url,
            pid=pid,
            uptime_s=uptime,
            model=service.model or service.image or "",
            ctx_per_slot=service.ctx_per_slot,
            parallel=service.parallel,
            runtime_version=version,
            detail=detail,
        )

    if not fleet.hosts[service.host].is_local(service.host):
        return make("remote", detail="on a remote host")
    backend = backend_for(loaded, service)
    record = backend.records.read(name)
    if record is None:
        holders = backend.port_holders(service.port, service.bind)
        if holders:
            return make("foreign", detail=f"port held by {holders[0].describe()}")
        return make("stopped", detail="not running")
    proc = alive(record)
    if proc is None:
        try:
            other = psutil.Process(record.pid).name()
            detail = f"recorded pid {record.pid} now belongs to {other!r}"
        except psutil.NoSuchProcess:
            detail = f"recorded pid {record.pid} is gone"
        return make("stale", record.pid, version=record.runtime_version, detail=detail)
    with http.client(timeout=3.0) as client:
        result = gate.probe(client, gate.url_for(record.bind, record.port, record.health_path))
    owned = owned_by(record.port, record.bind, proc.pid)
    detail = ""
    if result.state == "ok":
        state = "healthy" if owned else "foreign"
        if not owned:
            detail = "port answered by another process (L-33)"
    elif result.state == "loading":
        state = "loading"
    else:
        state = "unhealthy"
        detail = f"health: {result.state} {result.status or ''}".strip()
    uptime = round(time.time() - record.started_at, 1)
    return make(state, record.pid, uptime, record.runtime_version, detail)
