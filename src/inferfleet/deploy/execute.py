"""Carry out one service's actions on this host, in order; the first failure stops them.

Each action kind maps to one effect through the backends (process records,
systemctl, podman). Progress goes to ``emit`` as small dicts, which the
CLI prints or streams to the deploying machine as JSON lines.
"""

from __future__ import annotations

import getpass
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inferfleet.backends import health as gate
from inferfleet.backends import quadlet
from inferfleet.backends.ports import owned_by
from inferfleet.backends.process import ProcessBackend, alive
from inferfleet.backends.systemd import Systemctl, install_file, wait_unit_healthy
from inferfleet.deploy.actions import Action, retire_actions, service_actions
from inferfleet.deploy.desired import Desired, desired_state
from inferfleet.deploy.facts import service_state
from inferfleet.deploy.gates import Gate, gates_for, run_gate, wait_port_free
from inferfleet.deploy.inputs import FleetAtRevision, ServiceInputs
from inferfleet.deploy.local import Hooks, record_template, start_gated
from inferfleet.deploy.markers import Marker, MarkerStore
from inferfleet.deploy.planner import RETIRE, PlanItem
from inferfleet.deploy.state import Emit
from inferfleet.errors import HealthError
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.io import http
from inferfleet.render.facts import HostFacts
from inferfleet.runtimes import llamacpp


@dataclass
class Context:
    """Everything the actions of one apply share."""

    host: str
    revision: str
    at: FleetAtRevision
    root: Path  # the fleet file's folder at that revision
    facts: HostFacts
    state_dir: Path
    emit: Emit

    @property
    def fleet(self) -> Fleet:
        return self.at.fleet

    @property
    def markers(self) -> MarkerStore:
        return MarkerStore(self.state_dir)

    @property
    def processes(self) -> ProcessBackend:
        return ProcessBackend(self.state_dir)


def apply_item(
    ctx: Context, item: PlanItem, markers: dict[str, Marker], *, dry_run: bool
) -> tuple[list[Action], tuple[str, float | None] | None]:
    """Facts -> actions for one plan item, then (unless a dry run) carry them out.

    Returns the actions and, once executed, the outcome and the health gate's seconds.
    """
    name = item.service
    if item.action == RETIRE:
        marker = markers[name]
        state = service_state(name, ctx.facts, ctx.state_dir, marker)
        actions = retire_actions(marker, state)
        if dry_run:
            return actions, None
        run_retirement(ctx, actions, marker)
        return actions, ("retired", None)
    desired = desired_state(ctx.fleet, ctx.root, name, ctx.facts)
    extra = [f.path for f in desired.files]
    state = service_state(name, ctx.facts, ctx.state_dir, markers.get(name), extra_paths=extra)
    gates = gates_for(desired, ctx.fleet, ctx.root, ctx.facts)
    actions = service_actions(desired, state, gates, ctx.revision)
    if dry_run:
        return actions, None
    health_s = run_service(ctx, actions, desired, gates)
    kept = any(a.kind == "verify" for a in actions)
    return actions, ("kept" if kept else "deployed", health_s)


def _step(ctx: Context, action: Action) -> None:
    ctx.emit({"event": "step", **action.to_json()})


def run_service(
    ctx: Context, actions: list[Action], desired: Desired, gates: list[Gate]
) -> float | None:
    """Execute a deploy's actions; returns the seconds the health gate took (None if kept)."""
    by_check = {g.check: g for g in gates}
    health_s: float | None = None
    for action in actions:
        _step(ctx, action)
        kind = action.kind
        if kind == "gate":
            run_gate(by_check[action.target], desired, ctx.fleet, ctx.root, ctx.facts)
        elif kind == "stop":
            ctx.processes.stop(desired.name)
        elif kind == "stop-unit":
            scope, _, unit = action.target.partition(":")
            Systemctl(scope).stop(unit)
        elif kind == "disable":
            scope, _, unit = action.target.partition(":")
            Systemctl(scope).disable(unit)
        elif kind == "remove-container":
            quadlet.remove_container(ctx.facts.podman, desired.unit)
        elif kind == "wait-port":
            wait_port_free(desired)
        elif kind == "install":
            item = next(f for f in desired.files if f.path == action.target)
            install_file(Path(item.path), item.content)
        elif kind == "daemon-reload":
            Systemctl(desired.scope).daemon_reload()
        elif kind == "enable":
            Systemctl(desired.scope).enable(desired.service_unit)
        elif kind == "start":
            health_s = _start_process(ctx, desired)
        elif kind == "restart":
            Systemctl(desired.scope).reset_failed(desired.service_unit)
            Systemctl(desired.scope).restart(desired.service_unit)
        elif kind == "health":
            health_s = _unit_health(ctx, desired)
        elif kind == "verify":
            _verify_running(ctx, desired)
        elif kind == "marker":
            _record(ctx, desired, ctx.at.inputs[desired.name], health_s)
        else:
            raise AssertionError(f"unknown action kind {kind!r}")
    return health_s


def run_retirement(ctx: Context, actions: list[Action], marker: Marker) -> None:
    for action in actions:
        _step(ctx, action)
        kind = action.kind
        if kind == "stop":
            ctx.processes.stop(marker.service)
        elif kind in {"stop-unit", "disable"}:
            scope, _, unit = action.target.partition(":")
            systemctl = Systemctl(scope)
            (systemctl.stop if kind == "stop-unit" else systemctl.disable)(unit)
        elif kind == "remove-container":
            quadlet.remove_container(ctx.facts.podman, marker.unit)
        elif kind == "uninstall":
            Path(action.target).unlink(missing_ok=True)
        elif kind == "daemon-reload":
            Systemctl(marker.scope).daemon_reload()
        elif kind == "forget":
            ctx.markers.remove(marker.service)
        else:
            raise AssertionError(f"unknown retirement action {kind!r}")


def _health_hook(ctx: Context, name: str) -> Callable[[str, float], None]:
    def on_state(state: str, seconds: float) -> None:
        ctx.emit({"event": "health", "service": name, "state": state, "seconds": round(seconds, 3)})

    return on_state


def _start_process(ctx: Context, desired: Desired) -> float:
    service = desired.service
    template = record_template(
        desired.name,
        service,
        argv=desired.argv,
        spec_hash=desired.spec,
        model=service.model or "",
    )
    hooks = Hooks(health_state=_health_hook(ctx, desired.name))
    env = llamacpp.environment(service, dict(os.environ))
    _record, health = start_gated(
        ctx.processes, template, env=env, timeout=service.health.timeout, hooks=hooks
    )
    return health.seconds


def _unit_health(ctx: Context, desired: Desired) -> float:
    service = desired.service
    result = wait_unit_healthy(
        Systemctl(desired.scope),
        desired.service_unit,
        service=desired.name,
        bind=service.bind,
        port=service.port,
        path=service.health.path,
        timeout=service.health.timeout,
        on_state=_health_hook(ctx, desired.name),
    )
    return result.seconds


def _verify_running(ctx: Context, desired: Desired) -> None:
    """A kept service is green only if its own process answers now (L-33)."""
    service = desired.service
    pid: int | None = None
    if desired.backend == "process":
        record = ctx.processes.records.read(desired.name)
        proc = None if record is None else alive(record)
        pid = None if proc is None else proc.pid
    else:
        state = Systemctl(desired.scope).show(desired.service_unit)
        pid = state.main_pid if state.running else None
    url = gate.url_for(service.bind, service.port, service.health.path)
    with http.client(timeout=5.0) as client:
        probe = gate.probe(client, url)
    if pid is None or probe.state != "ok" or not owned_by(service.port, service.bind, pid):
        raise HealthError(
            f"{url} no longer answers from the service's own process",
            where=f"service {desired.name}",
            hint="it changed since the facts were read; deploy again to restart it",
        )


def _record(ctx: Context, desired: Desired, inputs: ServiceInputs, health_s: float | None) -> None:
    service = desired.service
    unit_backend = desired.backend != "process"
    ctx.markers.write(
        Marker(
            service=desired.name,
            host=ctx.host,
            revision=ctx.revision,
            inputs=inputs,
            backend=desired.backend,
            bind=service.bind,
            port=service.port,
            health_path=service.health.path,
            applied_at=time.time(),
            by=f"{getpass.getuser()}@{socket.gethostname()}",
            unit=desired.unit if unit_backend else "",
            scope=desired.scope,
            installed=[f.path for f in desired.files],
            healthy_after_s=None if health_s is None else round(health_s, 3),
        )
    )
