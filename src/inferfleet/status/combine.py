"""Decide each row from what was read: local records, ssh facts, HTTP answers, markers.

Pure functions over the readings, so every combination (a stale record, a
foreign process on the port, a host that answers HTTP but not ssh) is tested
with data. The one rule that matters most: a service is healthy only when its
own process answers (L-33); an answer from something else on the port is
``foreign``, and where ssh could not say which process answered, the row says
the pid is unverified.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferfleet import paths
from inferfleet.deploy.facts import gather, host_facts, system_become
from inferfleet.deploy.markers import MarkerStore
from inferfleet.deploy.state import STOPPED
from inferfleet.deploy.state import decide as decide_state
from inferfleet.errors import FleetError
from inferfleet.fleetfile.groups import unit_service
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.io import pids
from inferfleet.runtimes.registry import traits
from inferfleet.status.bench import BenchFigures
from inferfleet.status.endpoint import Reading
from inferfleet.status.model import HostRow, Revision, ServiceRow
from inferfleet.status.revisions import HostView


@dataclass(frozen=True)
class Local:
    """What this machine knows of one of its own services, beyond its HTTP answers."""

    state: str  # decided once, by inferfleet.deploy.state.decide (or "unknown")
    pid: int | None = None
    pid_source: str | None = None
    uptime_s: float | None = None
    runtime_version: str | None = None
    detail: str = ""

    @classmethod
    def of_state(cls, loaded: LoadedFleet, name: str) -> Local:
        """A service of this machine, any backend: the one decided state (deploy.state)."""
        service = unit_service(loaded.fleet, name)
        state_dir = paths.state_dir(loaded.fleet.hosts[service.host])
        try:
            marker = MarkerStore(state_dir).read(name)
        except FleetError:
            marker = None
        state = decide_state(
            gather(
                name,
                host_facts(loaded.root),
                state_dir,
                marker,
                endpoint=(service.bind, service.port, service.health.path),
                become=system_become(loaded.fleet, service.host),
            )
        )
        name_of_state = state.state
        detail = state.detail
        if state.state == STOPPED and marker is not None and service.backend != "process":
            name_of_state, detail = "down", "deployed here, but its unit is not running"
        elif state.state == STOPPED:
            detail = "not running"
        uptime = None if state.pid is None else pids.uptime(state.pid)
        return cls(
            name_of_state,
            state.pid,
            None if state.pid is None else ("record" if state.process_spec else "MainPID"),
            uptime,
            state.runtime_version or None,
            detail,
        )


def host_unreachable(is_local: bool, view: HostView, readings: list[Reading]) -> bool:
    """A remote host neither ssh nor any of its endpoints answered (``readings``: those read
    over HTTP from here; a service judged on its host has none)."""
    if is_local or (view.over_ssh and view.error is None):
        return False
    if not readings:
        return view.over_ssh  # nothing to read over HTTP; ssh was tried and failed
    return all(r.health == "down" for r in readings)


def decide(
    name: str,
    reading: Reading,
    view: HostView,
    mine: Local | None,
    *,
    unreachable: bool,
    on_host: bool = False,
) -> tuple[str, str]:
    """A service's state and the one-line reason for it.

    ``on_host``: only its host can tell (a loopback bind there): its host's
    facts decide alone, and without them it is ``unknown``, never healthy.
    """
    if mine is not None:
        return mine.state, mine.detail
    if on_host:
        return _on_host(name, view)
    if unreachable:
        return "unreachable", "no answer over HTTP" + (f"; {view.error}" if view.error else "")
    state = view.states.get(name) if view.error is None else None
    if state is None:
        if reading.health == "down":
            return "down", reading.detail
        return reading.health, reading.detail
    if state.healthy:
        return "healthy", ""
    if state.state not in {"stopped", "healthy"} and state.detail:
        # Decided on the host, from facts only it can read (deploy.state.decide).
        return state.state, state.detail
    if state.pid is None:
        if reading.health == "healthy":
            return "foreign", "answered, but no process of this service runs on the host (L-33)"
        return "down", "not running on the host"
    return _answered_by_other(reading, state.pid)


def _on_host(name: str, view: HostView) -> tuple[str, str]:
    """A service judged by its host's facts alone (nothing here can reach its port)."""
    if not view.over_ssh:
        return "unknown", f"not read on its host: {view.error or 'its host was not asked'}"
    if view.error is not None:
        return "unknown", f"host unreachable: {view.error}"
    state = view.states.get(name)
    if state is None:
        return "unknown", "its host's facts do not name it"
    if state.healthy:
        return "healthy", ""
    if state.state not in {"stopped", "healthy"} and state.detail:
        return state.state, state.detail
    if state.pid is None:
        return "down", "not running on the host"
    return "unhealthy", f"pid {state.pid} runs but does not answer its health check"


def contract_state(view: HostView, name: str, state: str, detail: str) -> tuple[str, str]:
    """A healthy service whose marker says its contract probe failed is red, not green.

    It stays so, with the first evidence line, until an apply passes the probe
    and writes a marker without the failure.
    """
    marker = view.markers.get(name) if view.error is None else None
    if marker is None or not marker.contract_failing:
        return state, detail
    evidence = marker.contract_evidence
    first = evidence[0] if evidence else "the contract probe failed"
    return "contract-failing", f"contract failing: {first}"


def _answered_by_other(reading: Reading, pid: int | None) -> tuple[str, str]:
    """Its process runs but did not itself answer a healthy check."""
    if reading.health == "healthy":
        return "foreign", f"the port is answered by another process than pid {pid} (L-33)"
    if reading.health == "down":
        return "unhealthy", f"pid {pid} runs but its health check does not answer"
    return reading.health, reading.detail


def service_row(
    loaded: LoadedFleet,
    name: str,
    url: str,
    reading: Reading,
    view: HostView,
    mine: Local | None,
    revision: Revision,
    bench: BenchFigures | None,
    *,
    unreachable: bool,
    on_host: bool = False,
) -> ServiceRow:
    fleet = loaded.fleet
    service = unit_service(fleet, name)
    runtime = None if service.runtime is None else fleet.runtimes[service.runtime].kind
    state, detail = decide(name, reading, view, mine, unreachable=unreachable, on_host=on_host)
    if state == "healthy":
        state, detail = contract_state(view, name, state, detail)
    notes = list(reading.notes)
    if on_host:
        notes.append(
            f"judged on host {service.host} over ssh: its endpoint is not read from here "
            "(slots, metrics and model as the fleet file declares them)"
        )

    pid, pid_source = (mine.pid, mine.pid_source) if mine is not None else (None, None)
    remote = view.states.get(name) if mine is None and view.error is None else None
    if remote is not None and remote.pid is not None:
        pid, pid_source = remote.pid, "MainPID" if remote.units else "record"
    if mine is None and remote is None and reading.health == "healthy":
        notes.append("pid not verified: no facts from the host over ssh")

    series = reading.series or {}
    names = traits(runtime).metrics if runtime is not None else None
    processing = series.get(names.running) if names is not None else None
    deferred = series.get(names.waiting) if names is not None else None
    live = reading.slots
    ctx = live.ctx_per_slot if live is not None else reading.info.ctx_per_slot
    slots = live.total if live is not None else reading.info.slots
    busy = live.busy if live is not None else None
    if (
        busy is None
        and processing is not None
        and not (names and runtime and traits(runtime).slots_endpoint)
    ):
        busy = int(processing)  # vLLM and SGLang have no /slots; running requests fill slots
    if ctx is not None and service.ctx_per_slot is not None and ctx != service.ctx_per_slot:
        notes.append(
            f"serves {ctx} tokens per slot, the fleet file says {service.ctx_per_slot} (L-25)"
        )
    if live is not None and service.kind == "llm" and live.total != service.parallel:
        notes.append(f"runs {live.total} slots, the fleet file says {service.parallel}")

    return ServiceRow(
        service=name,
        host=service.host,
        kind=service.kind,
        runtime=runtime,
        backend=service.backend,
        state=state,
        url=url,
        links=links(url, service.kind, runtime, service.health.path, service.metrics_on),
        detail=detail,
        pid=pid,
        pid_source=pid_source,
        uptime_s=mine.uptime_s if mine is not None else None,
        runtime_version=(mine.runtime_version if mine is not None else None)
        or reading.info.version,
        model=reading.info.model or service.alias or service.model or service.image,
        ctx_per_slot=ctx if ctx is not None else service.ctx_per_slot,
        parallel=service.parallel if service.kind == "llm" else None,
        slots=slots if slots is not None else (service.parallel if service.kind == "llm" else None),
        busy_slots=busy,
        requests_processing=processing,
        requests_deferred=deferred,
        metrics=reading.metrics if reading.health != "down" else "-",
        revision=revision,
        bench=bench,
        notes=notes,
    )


def links(url: str, kind: str, runtime: str | None, health: str, metrics: bool) -> dict[str, str]:
    """The endpoint's pages an operator opens: API base, health, slots, metrics."""
    found = {"health": url + health}
    if kind == "llm":
        found["api"] = url + "/v1"
        found["models"] = url + "/v1/models"
    if runtime is not None and traits(runtime).slots_endpoint:
        found["slots"] = url + "/slots"
    if metrics:
        found["metrics"] = url + "/metrics"
    return found


def host_row(
    loaded: LoadedFleet,
    host: str,
    view: HostView,
    rows: list[ServiceRow],
    *,
    ssh_used: bool,
    unreachable: bool,
    why_no_ssh: str,
    over_http: bool = True,
) -> HostRow:
    spec = loaded.fleet.hosts[host]
    is_local = spec.is_local(host)
    if is_local:
        reach, detail = "local", view.error or ""
    elif unreachable:
        reach = "unreachable"
        said = ["no endpoint of it answers over HTTP"] if over_http else []
        detail = "; ".join([*said, *([view.error] if view.error else [])])
    elif ssh_used and view.error is None:
        reach, detail = "ssh", ""
    elif not over_http:
        # Every service of it is judged on the host, which was not asked: nothing was read.
        reach, detail = "unknown", view.error or why_no_ssh
    else:
        reach = "http"
        detail = view.error if ssh_used and view.error else why_no_ssh
    return HostRow(
        host=host,
        address=spec.address or host,
        local=is_local,
        reach=reach,
        detail=detail,
        checkout_head=view.checkout_head,
        lock=view.lock,
        services=len(rows),
        healthy=sum(1 for r in rows if r.state == "healthy"),
        memory=dict(view.memory),
    )
