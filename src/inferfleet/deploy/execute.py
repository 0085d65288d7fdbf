"""Carry out one service's actions on this host, in order; the first failure stops them.

Each action kind maps to one effect through the backends (process records,
systemctl, podman). Progress goes to ``emit`` as small dicts, which the
CLI prints or streams to the deploying machine as JSON lines.

After the health gate, and before the marker, every path that starts a
service (``apply``, so ``deploy`` and ``rollback``, and ``up``) runs its
contract probe here, in this one place (:func:`run_contract`): a deploy is
not done when ``/health`` is green. A failure does not stop the server (it
is healthy and serves); the marker records the revision with ``contract:
failing`` and the evidence (L-41), and the item's outcome is
``contract-failing``.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from inferfleet.backends import health as gate
from inferfleet.backends import podman, quadlet
from inferfleet.backends.process import ProcessBackend
from inferfleet.backends.systemd import (
    Systemctl,
    uninstall_file,
    wait_unit_healthy,
)
from inferfleet.checks.secret_scan import parse_env_file
from inferfleet.client.keys import key_on_host
from inferfleet.deploy import archived
from inferfleet.deploy.actions import Action, retire_actions, service_actions
from inferfleet.deploy.facts import gather
from inferfleet.deploy.gates import Gate, gates_for, run_gate, wait_port_free
from inferfleet.deploy.inputs import FleetAtRevision, ServiceInputs
from inferfleet.deploy.lock import SERVICE_LOCK_WAIT_S, ServiceLock
from inferfleet.deploy.markers import (
    CONTRACT_FAILING,
    CONTRACT_PASSED,
    CONTRACT_SKIPPED,
    MAX_EVIDENCE,
    Marker,
    MarkerStore,
)
from inferfleet.deploy.planner import RETIRE, PlanItem
from inferfleet.deploy.rpc import shape_reader, worker_states
from inferfleet.deploy.starting import record_template, start_gated
from inferfleet.deploy.state import HEALTHY, Emit, decide
from inferfleet.errors import FleetError, HealthError, UsageError
from inferfleet.fleetfile.exposure import TCP_HEALTH
from inferfleet.fleetfile.fleet import Fleet, Service
from inferfleet.fleetfile.groups import members, unit_service
from inferfleet.io.archive import Archive, Keeper
from inferfleet.io.become import Become, for_scope
from inferfleet.render.facts import HostFacts
from inferfleet.render.frontdoor import FrontLaunch, Launch
from inferfleet.render.pipeline import ServiceLaunch, service_launch
from inferfleet.render.service_keys import key_variable, keyed
from inferfleet.render.settings import RenderedSettings, render_service_settings

if TYPE_CHECKING:
    from inferfleet.probe.minimal import Check

SETTINGS_MODE = 0o600  # rendered settings hold secrets (L-54)
INSTALL_MODE = 0o644  # units, Quadlet and env files (secrets live in secrets_env, L-55)
# A group's presets name every member's files and flags: its owner's, like settings.
OWNER_ONLY_KINDS = frozenset({"preset"})
CONTRACT_FAILING_OUTCOME = "contract-failing"


@dataclass(frozen=True)
class Verdict:
    """What the contract probe after the health gate found (or why it did not run)."""

    state: str  # passed | failing | skipped
    checks: list[Check] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # one line per failed check

    @property
    def failing(self) -> bool:
        return self.state == CONTRACT_FAILING


@dataclass(frozen=True)
class ItemDone:
    """How one plan item ended once executed."""

    outcome: str  # deployed | kept | retired | contract-failing
    healthy_after_s: float | None = None
    contract: Verdict | None = None  # None: a retirement, or a kept service not probed again
    # Files put back from the archive instead of written anew: {"entry", "path"} each.
    restored: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Ran:
    """What executing a deploy's actions found."""

    health_s: float | None = None  # the health gate's seconds (None if kept)
    verdict: Verdict | None = None  # None for a kept service not probed again
    restored: list[dict[str, str]] = field(default_factory=list)


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
    # Run the contract probe after the health gate (`up --no-contract` turns it off).
    contract: bool = True
    runtime_version: Callable[[ServiceLaunch], str] | None = None

    @property
    def fleet(self) -> Fleet:
        return self.at.fleet

    def become(self, scope: str) -> Become:
        """How this host gets root for a scope (its ``become``; user scope never escalates)."""
        host = self.fleet.hosts.get(self.host)
        return for_scope(self.host, None if host is None else host.become, scope)

    def systemctl(self, scope: str) -> Systemctl:
        return Systemctl(scope, self.become(scope))

    @property
    def markers(self) -> MarkerStore:
        return MarkerStore(self.state_dir)

    @property
    def processes(self) -> ProcessBackend:
        return ProcessBackend(self.state_dir)


def apply_item(
    ctx: Context, item: PlanItem, markers: dict[str, Marker], *, dry_run: bool
) -> tuple[list[Action], ItemDone | None]:
    """Facts -> actions for one plan item, then (unless a dry run) carry them out.

    Returns the actions and, once executed, how it ended (outcome, the health
    gate's seconds, the contract verdict).
    Executed under the service's lock (:class:`~inferfleet.deploy.lock.ServiceLock`),
    its facts and marker read once the lock is held: a concurrent ``up`` or
    ``down`` of the same service is waited for, never raced.
    """
    if dry_run:
        return _apply_item(ctx, item, markers, dry_run=True)
    name = item.service

    def waiting(text: str) -> None:
        ctx.emit({"event": "step", "kind": "lock", "service": name, "detail": text})

    with ServiceLock(ctx.state_dir, name) as lock:
        lock.acquire(f"apply of {ctx.revision}", wait=SERVICE_LOCK_WAIT_S, on_wait=waiting)
        fresh = dict(markers)
        now = ctx.markers.read(name)
        if now is not None:
            fresh[name] = now
        elif item.action != RETIRE:
            fresh.pop(name, None)
        return _apply_item(ctx, item, fresh, dry_run=False)


def _apply_item(
    ctx: Context, item: PlanItem, markers: dict[str, Marker], *, dry_run: bool
) -> tuple[list[Action], ItemDone | None]:
    name = item.service
    if item.action == RETIRE:
        marker = markers[name]
        state = decide(gather(name, ctx.facts, ctx.state_dir, marker, become=ctx.become("system")))
        actions = retire_actions(marker, state)
        if dry_run:
            return actions, None
        run_retirement(ctx, actions, marker)
        return actions, ItemDone("retired")
    fleet_file = ctx.root / PurePosixPath(ctx.at.fleet_path).name
    desired = service_launch(
        ctx.fleet, ctx.root, name, ctx.facts, shape_of=shape_reader(ctx.fleet, fleet_file)
    )
    extra = [f.path for f in desired.files]
    service = desired.service
    # Rendered here, on the host, from the templates at this revision and the
    # host's env files (L-54); a template that does not render fails this
    # service before anything is touched.
    settings = {s.dest: s for s in service_settings(ctx, name)}
    state = decide(
        gather(
            name,
            ctx.facts,
            ctx.state_dir,
            markers.get(name),
            extra_paths=extra,
            endpoint=(service.bind, service.port, service.health.path),
            settings={dest: s.sha256 for dest, s in settings.items()},
            become=ctx.become("system"),
        )
    )
    for dest in settings:
        status = state.settings_status(dest)
        ctx.emit(
            {
                "event": "step",
                "kind": "settings",
                "service": name,
                "detail": f"{dest}: {status} (rendered from its template, L-54)",
                "path": dest,
                "status": status,
            }
        )
        if status == "unchanged" and not dry_run:
            _owner_only(Path(dest))
    gates = gates_for(desired, ctx.fleet, ctx.root, ctx.facts)
    actions = service_actions(desired, state, gates, ctx.revision)
    if dry_run:
        return actions, None
    ran = run_service(ctx, actions, desired, gates, settings)
    kept = any(a.kind == "verify" for a in actions)
    outcome = "kept" if kept else "deployed"
    if ran.verdict is not None and ran.verdict.failing:
        outcome = CONTRACT_FAILING_OUTCOME
    return actions, ItemDone(outcome, ran.health_s, ran.verdict, ran.restored)


def service_settings(ctx: Context, name: str) -> list[RenderedSettings]:
    """The service's settings files rendered for this host; never inside the checkout."""
    service = unit_service(ctx.fleet, name)
    checkout = Path(ctx.facts.expand(ctx.fleet.hosts[service.host].checkout))
    return render_service_settings(name, service, ctx.facts, forbidden=[ctx.root, checkout])


def _owner_only(path: Path) -> None:
    """An unchanged settings file loosened by hand is made 0600 again (it holds secrets)."""
    with contextlib.suppress(OSError):
        if path.stat().st_mode & 0o7777 != SETTINGS_MODE:
            os.chmod(path, SETTINGS_MODE)


def _step(ctx: Context, action: Action) -> None:
    ctx.emit({"event": "step", **action.to_json()})


def run_service(
    ctx: Context,
    actions: list[Action],
    desired: Launch,
    gates: list[Gate],
    settings: Mapping[str, RenderedSettings] | None = None,
) -> Ran:
    """Execute a deploy's actions.

    Returns the seconds the health gate took (None if kept), the contract
    verdict (None for a kept service whose marker did not say it was failing)
    and the files put back from the archive.

    A file this deploy writes whose exact bytes an entry retired for this
    service holds (a rollback bringing a retired service back) is restored
    from that entry instead: byte for byte, with its mode, recorded in the
    entry's index (:meth:`~inferfleet.io.archive.Keeper.restore`).
    """
    by_check = {g.check: g for g in gates}
    ran = Ran()
    keeper = _keeper(ctx, desired.name, scope=desired.scope)
    replaced = archived.replaced_files(actions, desired, settings or {})
    if replaced:
        keeper.archive.ready()  # before anything is stopped
    writer = archived.Restorer.for_files(ctx.emit, keeper, desired.name, replaced)
    try:
        _run_actions(ctx, actions, desired, by_check, settings or {}, keeper, replaced, ran, writer)
    except BaseException:
        # What came back from the archive is recorded in its entries even when a later
        # step (the health gate) fails: the files are on the host either way.
        with contextlib.suppress(FleetError, OSError):
            writer.record()
        raise
    ran.restored = writer.record()
    return ran


def _run_actions(
    ctx: Context,
    actions: list[Action],
    desired: Launch,
    by_check: Mapping[str, Gate],
    settings: Mapping[str, RenderedSettings],
    keeper: Keeper,
    replaced: dict[Path, str],
    ran: Ran,
    writer: archived.Restorer,
) -> None:
    service = desired if isinstance(desired, ServiceLaunch) else None  # None: a front door
    for action in actions:
        _step(ctx, action)
        kind = action.kind
        if kind in {"start", "restart"} and service is not None and service.service.rpc:
            _workers_answer(ctx, service)  # after the old server let go of them
        if kind in {"write-settings", "install"} and replaced:
            # The files this deploy will change, archived together in one entry first.
            archived.announce(ctx.emit, desired.name, keeper.keep_replaced(replaced))
            replaced = {}
        if kind == "gate" and service is not None:  # a front door has no gates
            run_gate(
                by_check[action.target], service, ctx.fleet, ctx.root, ctx.facts, ctx.state_dir,
                emit=ctx.emit,
            )  # fmt: skip
        elif kind == "write-settings":
            rendered = settings[action.target]
            writer.write(Path(rendered.dest), rendered.content, mode=SETTINGS_MODE)
        elif kind == "stop":
            ctx.processes.stop(desired.name)
        elif kind == "stop-unit":
            scope, _, unit = action.target.partition(":")
            ctx.systemctl(scope).stop(unit)
        elif kind == "disable":
            scope, _, unit = action.target.partition(":")
            ctx.systemctl(scope).disable(unit)
        elif kind == "remove-container" and desired.container is not None:
            # By name and label: a same-named container that is not ours is refused (L-36).
            podman.remove_stale(ctx.facts.podman, desired.container, desired.name)
        elif kind == "remove-container":
            quadlet.remove_container(ctx.facts.podman, desired.unit, ctx.become(desired.scope))
        elif kind == "wait-port":
            # A start killed before it recorded its server left one that only its start
            # token names (backends/process.py): ours, so stopped by pid, not refused.
            reclaimed = ctx.processes.reclaim(desired.name)
            stopped = bool(reclaimed) or any(a.kind in {"stop", "stop-unit"} for a in actions)
            wait_port_free(desired, stopped=stopped, become=ctx.become(desired.scope))
        elif kind == "install":
            item = next(f for f in desired.files if f.path == action.target)
            mode = SETTINGS_MODE if item.kind in OWNER_ONLY_KINDS else INSTALL_MODE
            writer.write(Path(item.path), item.content, mode=mode)
        elif kind == "daemon-reload":
            ctx.systemctl(desired.scope).daemon_reload()
        elif kind == "enable":
            ctx.systemctl(desired.scope).enable(desired.service_unit)
        elif kind == "start":
            ran.health_s = _start_process(ctx, desired)
            ran.verdict = _contract(ctx, desired)
        elif kind == "restart":
            ctx.systemctl(desired.scope).reset_failed(desired.service_unit)
            # A Quadlet unit is started once its container is healthy (Notify=healthy):
            # queued, and the health gate below waits with progress (L-34).
            quadlet_unit = desired.backend == "quadlet"
            ctx.systemctl(desired.scope).restart(desired.service_unit, block=not quadlet_unit)
        elif kind == "health":
            ran.health_s = _unit_health(ctx, desired)
            ran.verdict = _contract(ctx, desired)
        elif kind == "verify":
            _verify_running(ctx, desired)
            recorded = None if service is None else ctx.markers.read(service.name)
            if service is not None and recorded is not None and recorded.contract_failing:
                # Kept as it runs, but not fine: probed again, so an apply can turn it green.
                ran.verdict = run_contract(ctx, service)
        elif kind == "marker" and service is not None:
            _record(
                ctx,
                service,
                ctx.at.inputs[desired.name],
                ran.health_s,
                ran.verdict,
                settings=sorted(settings),
            )
        else:
            raise AssertionError(f"unknown action kind {kind!r}")


def _workers_answer(ctx: Context, desired: ServiceLaunch) -> None:
    """A split server starts once each of its RPC workers answers (they start first)."""
    for worker in worker_states(ctx.fleet, desired.name):
        ctx.emit(
            {
                "event": "step",
                "kind": "rpc-worker",
                "service": desired.name,
                "detail": worker.message,
            }
        )
        if not worker.reachable:
            raise HealthError(
                worker.message,
                where=f"service {desired.name}",
                hint=f"deploy host {worker.host!r} first: its rpc worker starts before the "
                "server that uses it (inferfleet deploy --host HOST)",
            )


def _contract(ctx: Context, desired: Launch) -> Verdict | None:
    """A service's contract verdict; a front door has none (its gate is its own health)."""
    return run_contract(ctx, desired) if isinstance(desired, ServiceLaunch) else None


def run_contract(ctx: Context, desired: ServiceLaunch) -> Verdict:
    """The contract probe after the health gate: the one place every deploy path runs it.

    At least the alias listed, the per-slot window as declared (L-25) and a
    completion counted by the server; the full probe when the client facts ask
    for it (:mod:`inferfleet.probe.minimal`). A failure is a verdict, not an
    exception: the healthy server keeps running and the marker records it.
    """
    service = desired.service
    name = desired.name
    if not ctx.contract or service.kind != "llm" or service.health.path == TCP_HEALTH:
        why = "not an LLM service" if service.kind != "llm" else "skipped (--no-contract)"
        if service.health.path == TCP_HEALTH:
            why = "an RPC worker: its gate is its port, owned by its process"
        ctx.emit({"event": "step", "kind": "contract", "service": name, "detail": why})
        return Verdict(CONTRACT_SKIPPED)
    from inferfleet.probe.minimal import Check
    from inferfleet.probe.minimal import run_contract as probe  # httpx, after the gate

    url = service.url()
    checks: list[Check] = []
    evidence: list[str] = []
    for label, member in _contract_subjects(ctx.fleet, name, service):
        alias = member.model_id(label)
        ctx.emit(
            {
                "event": "step",
                "kind": "contract",
                "service": name,
                "detail": f"probe {url}: alias {alias!r} listed, {member.ctx_per_slot} tokens "
                "per slot (L-25), a completion counted by the server",
            }
        )
        found = probe(
            url,
            alias=alias,
            ctx_per_slot=member.ctx_per_slot,
            service=name if label == name else f"{name} member {label}",
            parallel=member.parallel,
            client=member.client,
            key=key_on_host(ctx.fleet, name, ctx.root),  # a keyed server's (L-58)
        )
        prefix = "" if label == name else f"{alias}: "
        checks += [Check(prefix + c.name, c.ok, c.detail) for c in found.checks]
        evidence += [prefix + line for line in found.evidence]
    ok = all(c.ok for c in checks)
    verdict = Verdict(CONTRACT_PASSED if ok else CONTRACT_FAILING, checks, evidence[:MAX_EVIDENCE])
    ctx.emit(
        {
            "event": "contract",
            "service": name,
            "state": verdict.state,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks],
            "evidence": verdict.evidence,
        }
    )
    return verdict


def _contract_subjects(fleet: Fleet, name: str, service: Service) -> list[tuple[str, Service]]:
    """What the contract probe checks: the service, or each member of a swap group, the
    default member last (it is the one loaded when the probe ends, as after a start)."""
    if name not in fleet.groups:
        return [(name, service)]
    found = list(members(fleet, name).items())
    default = fleet.groups[name].default
    return sorted(found, key=lambda item: item[0] == default)


def run_stop(ctx: Context, name: str, actions: list[Action], *, grace: float) -> None:
    """``inferfleet stop``'s actions (:func:`~inferfleet.deploy.actions.stop_actions`):
    the recorded process by pid (L-43), units through systemctl in their scope."""
    for action in actions:
        _step(ctx, action)
        if action.kind == "stop":
            ctx.processes.stop(name, grace=grace)
        elif action.kind in {"stop-unit", "disable"}:
            scope, _, unit = action.target.partition(":")
            systemctl = ctx.systemctl(scope)
            (systemctl.stop if action.kind == "stop-unit" else systemctl.disable)(unit)
        else:
            raise AssertionError(f"unknown stop action {action.kind!r}")


def run_retirement(ctx: Context, actions: list[Action], marker: Marker) -> None:
    keeper = _keeper(ctx, marker.service, marker, scope=marker.scope)
    retired = [Path(a.target) for a in actions if a.kind == "uninstall"]
    if retired:
        keeper.archive.ready()  # before anything is stopped
    for action in actions:
        _step(ctx, action)
        kind = action.kind
        if kind == "uninstall" and retired:
            # Trash, not delete: the service's files go to one archive entry first.
            archived.announce(ctx.emit, marker.service, keeper.keep(retired, reason="retire"))
            retired = []
        if kind == "stop":
            ctx.processes.stop(marker.service)
        elif kind in {"stop-unit", "disable"}:
            scope, _, unit = action.target.partition(":")
            systemctl = ctx.systemctl(scope)
            (systemctl.stop if kind == "stop-unit" else systemctl.disable)(unit)
        elif kind == "remove-container":
            quadlet.remove_container(ctx.facts.podman, marker.unit, ctx.become(marker.scope))
        elif kind == "uninstall":
            uninstall_file(Path(action.target), keeper=keeper)
        elif kind == "daemon-reload":
            ctx.systemctl(marker.scope).daemon_reload()
        elif kind == "forget":
            ctx.markers.remove(marker.service)
        else:
            raise AssertionError(f"unknown retirement action {kind!r}")


def _keeper(
    ctx: Context, name: str, marker: Marker | None = None, *, scope: str = "user"
) -> Keeper:
    """Who removes or replaces this service's host files: archived under the state dir first.

    The files on the host came from the revision its marker names (L-41);
    that is the revision the archive entry is filed under.
    """
    if marker is None:
        with contextlib.suppress(FleetError):
            marker = ctx.markers.read(name)
    return Keeper(
        Archive(ctx.state_dir),
        service=name,
        revision="" if marker is None else marker.revision,
        by_revision=ctx.revision,
        become=ctx.become(scope),
    )


def _health_hook(ctx: Context, name: str) -> Callable[[str, float], None]:
    def on_state(state: str, seconds: float) -> None:
        ctx.emit({"event": "health", "service": name, "state": state, "seconds": round(seconds, 3)})

    return on_state


def _start_process(ctx: Context, desired: Launch) -> float:
    # A container's writable mounts (L-37); a front door's data (Caddy's local CA: its own).
    mode = 0o700 if isinstance(desired, FrontLaunch) else 0o777
    for folder in desired.make_dirs:
        Path(folder).mkdir(mode=mode, parents=True, exist_ok=True)
    if isinstance(desired, FrontLaunch):
        version, env = desired.engine, desired.process_env(os.environ)
    else:
        version = "" if ctx.runtime_version is None else ctx.runtime_version(desired)
        secrets = _secrets_of(ctx, desired)
        _require_key(ctx, desired, secrets)
        env = desired.process_env(os.environ, secrets)
    _record, health = start_gated(
        ctx.processes,
        record_template(desired, runtime_version=version),
        env=env,
        timeout=desired.health_timeout,
        on_state=_health_hook(ctx, desired.name),
        tls=tls_of(desired),
    )
    return health.seconds


def tls_of(desired: Launch) -> gate.TlsTarget | None:
    """How its health route is asked over TLS (the auth proxy), else None (plain http)."""
    if not isinstance(desired, FrontLaunch) or desired.health_scheme != "https":
        return None
    root = None if desired.tls_root is None else Path(desired.tls_root)
    return gate.TlsTarget(root, desired.tls_name)


def _secrets_of(ctx: Context, desired: ServiceLaunch) -> dict[str, str]:
    """The values of the service's ``secrets_env`` file, for its process only."""
    declared = desired.service.secrets_env
    if declared is None:
        return {}
    return parse_env_file(Path(ctx.facts.expand(declared)))


def _require_key(ctx: Context, desired: ServiceLaunch, secrets: Mapping[str, str]) -> None:
    """A server beyond loopback whose secrets_env is meant to hold its API key starts with
    it, or not at all (L-58). Without a secrets_env, `check` reports it
    (key-beyond-loopback), as it reports every other rule a deploy does not run."""
    variable = key_variable(ctx.fleet, desired.name)
    declared = desired.service.secrets_env is not None
    if not keyed(ctx.fleet, desired.name) or not declared or variable is None:
        return
    if secrets.get(variable):
        return
    raise UsageError(
        f"service {desired.name!r} binds {desired.service.bind}, beyond loopback, and its "
        f"secrets_env holds no {variable}: it would answer anyone who reaches the port",
        where=f"services.{desired.name}.secrets_env",
        hint=f"add {variable}=<a long random key> to its secrets_env file (mode 600); "
        "the gateway, the proxy and inferfleet send it (docs/closed-by-default.md)",
    )


def _unit_health(ctx: Context, desired: Launch) -> float:
    result = wait_unit_healthy(
        ctx.systemctl(desired.scope),
        desired.service_unit,
        service=desired.name,
        bind=desired.bind,
        port=desired.port,
        path=desired.health_path,
        timeout=desired.health_timeout,
        on_state=_health_hook(ctx, desired.name),
        owners=None if desired.image is None else lambda: _container_pids(ctx, desired),
        tls=tls_of(desired),
    )
    return result.seconds


def _container_pids(ctx: Context, desired: Launch) -> set[int]:
    """The processes of a unit's labelled container (rootful through ``become``, L-33)."""
    return podman.owner_pids(
        ctx.facts.podman, desired.unit, desired.name, ctx.become(desired.scope)
    )


def _verify_running(ctx: Context, desired: Launch) -> None:
    """A kept service is green only if its own process answers now (L-33)."""
    state = decide(
        gather(
            desired.name,
            ctx.facts,
            ctx.state_dir,
            ctx.markers.read(desired.name) if desired.marked else None,
            endpoint=(desired.bind, desired.port, desired.health_path),
            become=ctx.become("system"),
            tls=tls_of(desired),
        )
    )
    if state.state != HEALTHY:
        raise HealthError(
            f"{desired.health_url} no longer answers from the service's own process "
            f"({state.state}: {state.detail})",
            where=f"service {desired.name}",
            hint="it changed since the facts were read; deploy again to restart it",
        )


def _record(
    ctx: Context,
    desired: ServiceLaunch,
    inputs: ServiceInputs,
    health_s: float | None,
    verdict: Verdict | None,
    *,
    settings: list[str] | None = None,
) -> None:
    """The marker: the revision runs (healthy, L-41), with its contract verdict.

    A kept service that was not probed again keeps the verdict its marker had.
    """
    service = desired.service
    unit_backend = desired.backend != "process"
    if verdict is None:
        before = ctx.markers.read(desired.name)
        contract = "" if before is None else before.contract
        evidence = [] if before is None else list(before.contract_evidence)
    else:
        contract, evidence = verdict.state, list(verdict.evidence)
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
            settings=list(settings or []),
            healthy_after_s=None if health_s is None else round(health_s, 3),
            contract=contract,
            contract_evidence=evidence,
        )
    )
