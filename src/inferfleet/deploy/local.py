"""``up`` and ``down`` for the services of this machine: ``up`` is ``apply`` without git.

``up`` takes the same path as ``apply``: the one launch
(:func:`inferfleet.render.pipeline.service_launch`), the same gates, actions,
executor and markers, so ``up`` and ``apply`` never restart each other's
servers. What it adds is convenience for a fresh machine: the runtime is
built from its pinned source if missing, a model shipped as a Python
package is assembled, and model files are verified with a progress bar
before the gates run. The revision it records is the checkout's HEAD when
the fleet file sits in a clean git checkout, else ``untracked``.

The contract probe after the health gate is apply's own
(:func:`inferfleet.deploy.execute.run_contract`): a service that is healthy
but fails it keeps running, its marker says ``contract: failing``, and ``up``
stops there, as apply does (later services are not started).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inferfleet import paths
from inferfleet.artifacts.manifest import declared_files
from inferfleet.artifacts.materialise import materialise
from inferfleet.artifacts.verify import gate as verify_gate
from inferfleet.backends.process import ProcessBackend, StopResult
from inferfleet.deploy import execute, noop
from inferfleet.deploy.apply import lock_for
from inferfleet.deploy.facts import host_facts
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.holds import Hold, HoldStore
from inferfleet.deploy.inputs import FleetAtRevision
from inferfleet.deploy.lock import LOCK_NAME, SERVICE_LOCK_WAIT_S, HostLock, ServiceLock
from inferfleet.deploy.markers import MarkerStore
from inferfleet.deploy.planner import DEPLOY, HELD, PlanItem
from inferfleet.deploy.rpc import shape_reader
from inferfleet.deploy.worktree import UNTRACKED, fleet_here
from inferfleet.errors import FleetError, RuntimeInstallError, UsageError
from inferfleet.fleetfile.fleet import RuntimeSource, Service
from inferfleet.fleetfile.groups import deploy_units, is_unit, unit_service
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.install import llamacpp_build, pinned_venv
from inferfleet.render.pipeline import ServiceLaunch, service_launch
from inferfleet.runtimes import pinned
from inferfleet.runtimes.registry import traits

if TYPE_CHECKING:
    from inferfleet.documents import UpFront
    from inferfleet.probe.minimal import Check


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
    action: str  # "started" | "restarted" | "unchanged" | "held"
    url: str
    pid: int | None
    model: str
    ctx_per_slot: int
    parallel: int
    seconds_to_healthy: float | None
    checks: list[Check] = field(default_factory=list)
    reason: str = ""
    revision: str = UNTRACKED
    contract: str = ""  # passed | failing | skipped; "" when a kept service was not probed
    evidence: list[str] = field(default_factory=list)  # the failed contract checks

    @property
    def contract_failing(self) -> bool:
        return self.contract == "failing"


def local_services(loaded: LoadedFleet, only: str | None = None) -> list[str]:
    """Services of this machine (hosts whose address is loopback/localhost)."""
    fleet = loaded.fleet
    if only is not None:
        if not is_unit(fleet, only):
            raise UsageError(
                f"no service named {only!r} in {loaded.path}",
                hint=f"known services: {', '.join(deploy_units(fleet)) or '(none)'} (a swap "
                "group's members start with their group)",
            )
        return [only]
    units = {name: unit_service(fleet, name) for name in deploy_units(fleet)}
    return [name for name, svc in units.items() if fleet.hosts[svc.host].is_local(svc.host)]


def backend_for(loaded: LoadedFleet, service: Service) -> ProcessBackend:
    return ProcessBackend(paths.state_dir(loaded.fleet.hosts[service.host]))


# ---------------------------------------------------------------- preparation


def prepare(
    loaded: LoadedFleet, name: str, hooks: Hooks, *, here: str | None = None, build: bool = True
) -> ServiceLaunch:
    """Runtime present (built if missing, with ``build``), model files present and verified,
    launch computed. ``here``: this machine's host name when the fleet's address for it is
    not loopback (``inferfleet start --host``, run on the host over ssh)."""
    fleet = loaded.fleet
    service = unit_service(fleet, name)
    host = fleet.hosts[service.host]
    if service.host != here and not host.is_local(service.host):
        raise UsageError(
            f"service {name!r} runs on host {service.host!r}, not on this machine",
            hint="`up` starts the services of this machine; remote hosts are deployed over ssh "
            "(inferfleet deploy)",
        )
    runtime_version(loaded, service, hooks, build=build)
    launch = service_launch(
        fleet, loaded.root, name, host_facts(loaded.root), shape_of=shape_reader(fleet, loaded.path)
    )
    for model_name in launch.models:
        model = fleet.models[model_name]
        materialise(model_name, model, declared_files(model, loaded.root), hooks.note)
        _verify_with_progress(name, model_name, loaded, hooks)
    return launch


def _verify_with_progress(service: str, model_name: str, loaded: LoadedFleet, hooks: Hooks) -> None:
    """The same gate apply runs: files without a verification record are hashed once
    (here, with a progress bar) and recorded; only a mismatch refuses (L-01, L-08)."""
    bars: list[Callable[[int], None]] = []

    def on_start(total: int, count: int) -> None:
        if hooks.hash_progress is not None:
            bars.append(hooks.hash_progress(total, count))

    def on_bytes(done: int) -> None:
        for advance in bars:
            advance(done)

    verify_gate(
        model_name,
        loaded.fleet.models[model_name],
        loaded.root,
        where=f"service {service}",
        on_bytes=on_bytes,
        on_start=on_start,
    )


def runtime_version(loaded: LoadedFleet, service: Service, hooks: Hooks, *, build: bool) -> str:
    """The installed runtime's version text; with ``build``, build a pinned source first."""
    if service.runtime is None:
        return ""
    runtime = loaded.fleet.runtimes[service.runtime]
    if runtime.image is None and runtime.source is not None and pinned.is_venv(runtime.kind):
        return _venv_version(runtime.kind, runtime.source, hooks, install=build)
    if runtime.image is not None or not traits(runtime.kind).pinned_build:
        return ""
    if runtime.source is not None:
        done = llamacpp_build.installed(runtime.source, loaded.root)
        if done is None and build:
            hooks.note(f"llama-server {runtime.source.pin} is not built yet; building it once")
            done, _ = llamacpp_build.install(
                runtime.source,
                root=loaded.root,
                on_progress=hooks.build_progress,
                on_phase=hooks.note,
            )
        return "" if done is None else done.version_text
    if llamacpp_build.server_binary(runtime) is None:
        raise RuntimeInstallError(
            f"runtime {service.runtime!r}: binary {runtime.binary} does not exist",
            hint="fix the runtime's binary path, or give it a source to build from",
        )
    return ""


def _venv_version(kind: str, source: RuntimeSource, hooks: Hooks, *, install: bool) -> str:
    """A pinned Python package's venv (vLLM): installed once when missing (L-42)."""
    done = pinned_venv.installed(pinned_venv.runtime_pin(kind, source))
    if done is None and install:
        hooks.note(f"{source.package} {source.version} is not installed yet; installing it once")
        done, _ = pinned_venv.install(pinned_venv.runtime_pin(kind, source), on_phase=hooks.note)
    return "" if done is None else f"{done.package} {done.version}"


# ---------------------------------------------------------------- up


def up(
    loaded: LoadedFleet,
    names: list[str],
    hooks: Hooks,
    *,
    contract: bool = True,
    lift: Sequence[str] = (),
    here: str | None = None,
    build: bool = True,
) -> list[UpResult]:
    """Apply the named services of this machine, one gated service at a time.

    A service held down (``stop --hold``) is left down and reported ``held``,
    unless it is in ``lift`` (``inferfleet start``): its hold is lifted under
    the host's lock, then it starts. ``here`` and ``build`` as for :func:`prepare`.
    """
    held = {n: h for n in names if n not in lift and (h := _hold_of(loaded, n)) is not None}
    launches = [
        prepare(loaded, name, hooks, here=here, build=build) for name in names if name not in held
    ]
    at = fleet_here(loaded)
    results = [_held_result(loaded, at, hold) for hold in held.values()]
    by_host: dict[str, list[ServiceLaunch]] = {}
    for launch in launches:
        by_host.setdefault(launch.host, []).append(launch)
    for host_name, group in by_host.items():
        state_dir = paths.state_dir(loaded.fleet.hosts[host_name])
        with host_lock(loaded, host_name, state_dir) as lock:
            # A second `up` waits for the first (and then finds its servers running);
            # a deploy that holds the host lock is waited for the same way.
            lock.acquire(
                f"up of {', '.join(item.name for item in group)}",
                wait=SERVICE_LOCK_WAIT_S,
                on_wait=hooks.note,
            )
            holds = HoldStore(state_dir)
            for name in lift:
                if holds.remove(name):
                    hooks.note(f"{name}: hold lifted")
                    forget_memo(loaded)
            for launch in group:
                hold = holds.read(launch.name)
                if hold is not None:  # held while this run waited for the lock
                    results.append(_held_result(loaded, at, hold))
                    continue
                done = _up_one(loaded, at, host_name, state_dir, launch, hooks, contract)
                results.append(done)
                if done.contract_failing:
                    # As apply: the first contract failure stops the run (L-40).
                    return results
    return results


def _up_one(
    loaded: LoadedFleet,
    at: FleetAtRevision,
    host_name: str,
    state_dir: Path,
    launch: ServiceLaunch,
    hooks: Hooks,
    contract: bool,
) -> UpResult:
    service = launch.service
    name = launch.name
    url = service.url()

    def emit(event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "step" and event.get("kind") not in {"gate", "marker", "contract"}:
            hooks.note(f"{name}: {event.get('detail', '')}")
        elif kind == "health" and hooks.health_state is not None:
            hooks.health_state(str(event.get("state")), float(event.get("seconds", 0.0)))

    version = runtime_version(loaded, service, hooks, build=False)
    ctx = execute.Context(
        host_name,
        at.revision,
        at,
        loaded.root,
        host_facts(loaded.root),
        state_dir,
        emit,
        contract=contract,
        runtime_version=lambda _launch: version,
    )
    markers = MarkerStore(state_dir).all()
    before = ctx.processes.records.read(name)
    marker = markers.get(name)
    item = PlanItem(name, DEPLOY, ["up"], None if marker is None else marker.revision)
    actions, done = execute.apply_item(ctx, item, markers, dry_run=False)
    verdict = None if done is None else done.contract
    kinds = {a.kind for a in actions}
    if "verify" in kinds:
        action, reason = "unchanged", "already running with this spec"
    elif kinds & {"stop", "stop-unit"}:
        changed = before is not None and before.spec_hash != launch.spec
        action, reason = "restarted", "spec changed" if changed else "it was not healthy"
        if not changed and "write-settings" in kinds:
            reason = "settings changed"  # rendered from their templates (L-54)
    else:
        action, reason = "started", ""
    record = ctx.processes.records.read(name)
    written = MarkerStore(state_dir).read(name)
    pid = record.pid if record is not None else None
    return UpResult(
        name,
        action,
        url,
        pid,
        service.model or service.image or "",
        service.ctx_per_slot or 0,
        service.parallel,
        None if written is None else written.healthy_after_s,
        [] if verdict is None else list(verdict.checks),
        reason,
        at.revision,
        "" if verdict is None else verdict.state,
        [] if verdict is None else list(verdict.evidence),
    )


def _hold_of(loaded: LoadedFleet, name: str) -> Hold | None:
    service = unit_service(loaded.fleet, name)
    return HoldStore(paths.state_dir(loaded.fleet.hosts[service.host])).read(name)


def _held_result(loaded: LoadedFleet, at: FleetAtRevision, hold: Hold) -> UpResult:
    """A held service as up reports it: left down, with the hold's reason."""
    service = unit_service(loaded.fleet, hold.service)
    return UpResult(
        hold.service,
        HELD,
        service.url(),
        None,
        service.model or service.image or "",
        service.ctx_per_slot or 0,
        service.parallel,
        None,
        reason=hold.describe(),
        revision=at.revision,
    )


def forget_memo(loaded: LoadedFleet) -> None:
    """A hold placed or lifted changes what a no-op apply would say: its memo goes."""
    try:
        repo = Repo.containing(loaded.path)
    except FleetError:
        return
    noop.forget(repo.git_dir())


@contextlib.contextmanager
def host_lock(loaded: LoadedFleet, host: str, state_dir: Path) -> Iterator[HostLock]:
    """apply's lock when the fleet is in a git checkout (so up and apply exclude each other)."""
    try:
        repo: Repo | None = Repo.containing(loaded.path)
    except FleetError:
        repo = None
    if repo is not None:
        with lock_for(repo, host) as lock:
            yield lock
        return
    state_dir.mkdir(parents=True, exist_ok=True)
    with HostLock(state_dir / LOCK_NAME, host) as lock:
        yield lock


# ---------------------------------------------------------------- the front door


def front_here(loaded: LoadedFleet) -> list[str]:
    """The front-door parts (gateway, proxy) this machine runs, in the order they deploy."""
    hosts = loaded.fleet.hosts
    return [name for name, host in loaded.fleet.front_door.items() if hosts[host].is_local(host)]


def up_front(loaded: LoadedFleet, name: str, hooks: Hooks) -> UpFront | None:
    """One front-door part of this machine (``gateway``, then ``proxy``), after the services
    of the run are healthy; None when the fleet has none here."""
    from inferfleet.deploy import frontdoor

    if name not in front_here(loaded):
        return None
    fleet = loaded.fleet
    host = fleet.front_door[name]
    state_dir = paths.state_dir(fleet.hosts[host])
    with host_lock(loaded, host, state_dir) as lock:
        lock.acquire(f"up of the {name}", wait=SERVICE_LOCK_WAIT_S, on_wait=hooks.note)
        return frontdoor.deploy(
            fleet,
            host_facts(loaded.root),
            state_dir,
            name,
            root=loaded.root,
            note=hooks.note,
            on_state=hooks.health_state,
        )


def down_front(loaded: LoadedFleet, name: str, *, grace: float = 10.0) -> StopResult | None:
    """Stop this machine's process-backend front-door part by its recorded pid (L-43)."""
    from inferfleet.deploy import frontdoor

    if name not in front_here(loaded):
        return None
    host = loaded.fleet.front_door[name]
    return frontdoor.stop(paths.state_dir(loaded.fleet.hosts[host]), name, grace=grace)


# ---------------------------------------------------------------- down


def down(
    loaded: LoadedFleet,
    name: str,
    *,
    grace: float = 10.0,
    on_wait: Callable[[str], None] = lambda _text: None,
) -> StopResult:
    """Stop a process-backend service by its recorded pid, and forget its marker.

    A marker says which revision a service *runs* (L-41); once it is stopped
    here, the next ``up`` or ``apply`` must see it as not deployed and start it.
    """
    service = unit_service(loaded.fleet, name)
    state_dir = paths.state_dir(loaded.fleet.hosts[service.host])
    with ServiceLock(state_dir, name) as lock:
        # Never while an up or apply of this service is starting it.
        lock.acquire(f"down of {name}", wait=SERVICE_LOCK_WAIT_S, on_wait=on_wait)
        result = backend_for(loaded, service).stop(name, grace=grace)
        if result.outcome != "not-running":
            MarkerStore(state_dir).remove(name)
    return result
