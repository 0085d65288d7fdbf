"""Collect the fleet's status: every host and service read at once, none allowed to stop it.

Per host: this machine reads its own records and markers; a remote host is
asked over ssh for its facts (``inferfleet apply --facts``: pids or
MainPIDs, whether the answering process is the service's own (L-33),
markers), one round trip per host, bounded in time and size. Per service:
its endpoint is read over HTTP from here, as Prometheus and clients reach
it, unless only its host can tell (a loopback bind there, or the fleet's
``health_from: host``): then its host's facts alone decide, and a host that
does not answer makes it ``unknown``, never healthy (L-33). Reads run in
parallel with short timeouts; whatever fails becomes a state (``down``,
``unreachable``, ``unknown``) or a note.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from inferfleet import paths
from inferfleet.client.keys import service_key
from inferfleet.deploy.holds import Hold
from inferfleet.deploy.rpc import worker_states
from inferfleet.errors import FleetError, UsageError
from inferfleet.fleetfile.exposure import TCP_HEALTH
from inferfleet.fleetfile.groups import deploy_units, group_of, members, unit_service
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.fleetfile.rpc import worker_unit
from inferfleet.io import http
from inferfleet.render.endpoints import judged_on_host, reachable_address
from inferfleet.render.rpc import endpoints
from inferfleet.status import revisions
from inferfleet.status.bench import BenchIndex, BenchReader
from inferfleet.status.combine import Local, host_row, host_unreachable, service_row
from inferfleet.status.endpoint import Reading, read
from inferfleet.status.frontdoor import FrontRow, master_key, proxy_key, read_gateway, read_proxy
from inferfleet.status.group import member_states
from inferfleet.status.group import summary as group_summary
from inferfleet.status.model import FleetStatus, ServiceRow
from inferfleet.status.revisions import HostView, RepoState

MAX_WORKERS = 16


@dataclass(frozen=True)
class Options:
    ssh: bool = True  # ask remote hosts for their facts over ssh
    timeout: float = 2.0  # per HTTP request
    results_dir: Path | None = None  # bench results; default: the state dir's bench/
    facts_ttl: float = 0.0  # reuse a host's ssh facts this long (the board polls often)
    host_timeout: float = 20.0  # per host's ssh facts (connecting included)


def base_url(loaded: LoadedFleet, name: str) -> str:
    """Where this machine reaches a service: its bind address here, the fleet's address there."""
    fleet = loaded.fleet
    service = unit_service(fleet, name)
    if fleet.hosts[service.host].is_local(service.host):
        return service.url()
    return f"http://{reachable_address(fleet, service)}:{service.port}"


class Collector:
    """Collects the status; keeps caches between calls (the board calls it every few seconds)."""

    def __init__(self, loaded: LoadedFleet, options: Options | None = None) -> None:
        self.loaded = loaded
        self.options = options or Options()
        self._bench = BenchReader()
        self._lock = threading.Lock()
        self._repo: tuple[float, RepoState] | None = None
        self._facts: dict[str, tuple[float, HostView]] = {}

    @property
    def results_dir(self) -> Path:
        return self.options.results_dir or paths.state_dir() / "bench"

    def hosts(self, wanted: Sequence[str] | None) -> list[str]:
        fleet = self.loaded.fleet
        if not wanted:
            return list(fleet.hosts)
        unknown = [h for h in wanted if h not in fleet.hosts]
        if unknown:
            raise UsageError(
                f"no host named {', '.join(map(repr, unknown))} in {self.loaded.path}",
                hint=f"hosts: {', '.join(sorted(fleet.hosts)) or '(none)'}",
            )
        return list(dict.fromkeys(wanted))

    def collect(
        self, hosts: Sequence[str] | None = None, *, services: Sequence[str] | None = None
    ) -> FleetStatus:
        """The status of ``hosts`` (default: every host), only ``services`` when given."""
        fleet = self.loaded.fleet
        names = self.hosts(hosts)
        units = {n: unit_service(fleet, n) for n in deploy_units(fleet)}
        # A swap group's member is shown as its group's row (one server).
        only = None if services is None else {group_of(fleet, n) or n for n in services}
        services = [n for n, s in units.items() if s.host in names and (only is None or n in only)]
        repo = self._repo_state()
        workers = max(1, min(MAX_WORKERS, len(names) + 2 * len(services)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="status") as pool:
            views = {h: pool.submit(self._host_view, repo, h) for h in names}
            readings = {n: pool.submit(self._reading, n) for n in services}
            locals_ = {n: pool.submit(self._local, n) for n in services if self._is_local(n)}
            groups = {n: pool.submit(self._members, n) for n in services if n in fleet.groups}
            bench: Future[BenchIndex] = pool.submit(self._bench.scan, self.results_dir)
            front: Future[FrontRow | None] = pool.submit(self._gateway)
            door: Future[FrontRow | None] = pool.submit(self._proxy, repo, views)
            host_views = {h: f.result() for h, f in views.items()}
            service_readings = {n: f.result() for n, f in readings.items()}
            local_facts = {n: f.result() for n, f in locals_.items()}
            group_states = {n: f.result() for n, f in groups.items()}
            index = bench.result()
            gateway_row = front.result()
            proxy_row = door.result()

        rows: list[ServiceRow] = []
        per_host: dict[str, tuple[HostView, bool]] = {}
        for host in names:
            view = host_views[host]
            ours = [n for n in services if units[n].host == host]
            direct = [service_readings[n] for n in ours if not self._on_host(n)]
            unreachable = host_unreachable(fleet.hosts[host].is_local(host), view, direct)
            per_host[host] = (view, unreachable)
            revs = revisions.revisions(repo, host, ours, view)
            rows += [
                service_row(
                    self.loaded,
                    name,
                    base_url(self.loaded, name),
                    service_readings[name],
                    view,
                    local_facts.get(name),
                    revs[name],
                    index.figures(name, self._addresses(name)),
                    unreachable=unreachable,
                    on_host=self._on_host(name),
                )
                for name in ours
            ]
        rows = [_with_members(row, group_states.get(row.service)) for row in rows]
        rows = [_with_hold(row, host_views[row.host].holds.get(row.service)) for row in rows]
        by_name = {row.service: row for row in rows}
        rows = [self._with_workers(row, by_name) for row in rows]
        host_rows = [
            host_row(
                self.loaded,
                host,
                view,
                [row for row in rows if row.host == host],
                ssh_used=self._ssh_for(repo, host),
                unreachable=unreachable,
                why_no_ssh=self._why_no_ssh(repo),
                over_http=any(not self._on_host(row.service) for row in rows if row.host == host),
            )
            for host, (view, unreachable) in per_host.items()
        ]
        notes = list(index.notes)
        if repo.side is None:
            notes.append(f"revisions are not tracked: {repo.note}")
        return FleetStatus(
            file=str(self.loaded.path),
            head=repo.head,
            collected_at=round(time.time(), 3),
            hosts=host_rows,
            services=rows,
            notes=notes,
            gateway=gateway_row,
            proxy=proxy_row,
        )

    # ------------------------------------------------------------ parts

    def _is_local(self, name: str) -> bool:
        service = unit_service(self.loaded.fleet, name)
        return self.loaded.fleet.hosts[service.host].is_local(service.host)

    def _on_host(self, name: str) -> bool:
        """Only the service's host can tell its health (render.endpoints.judged_on_host)."""
        return judged_on_host(self.loaded.fleet, unit_service(self.loaded.fleet, name))

    def _ssh_for(self, repo: RepoState, host: str) -> bool:
        is_local = self.loaded.fleet.hosts[host].is_local(host)
        return self.options.ssh and repo.side is not None and not is_local

    def _why_no_ssh(self, repo: RepoState) -> str:
        if not self.options.ssh:
            return "read over HTTP only (ssh not used)"
        return f"read over HTTP only: {repo.note}"

    def _addresses(self, name: str) -> list[str]:
        service = unit_service(self.loaded.fleet, name)
        found = [base_url(self.loaded, name)]
        found.append(f"{reachable_address(self.loaded.fleet, service)}:{service.port}")
        return found

    def _repo_state(self) -> RepoState:
        now = time.monotonic()
        with self._lock:
            if self._repo is not None and now - self._repo[0] < self.options.facts_ttl:
                return self._repo[1]
        state = revisions.repo_state(self.loaded)
        with self._lock:
            self._repo = (now, state)
        return state

    def _host_view(self, repo: RepoState, host: str) -> HostView:
        spec = self.loaded.fleet.hosts[host]
        if spec.is_local(host):
            return revisions.local_facts(spec)
        if not self._ssh_for(repo, host):
            # Without ssh a remote host's markers cannot be read: its revisions are unknown.
            # Its facts are read in its checkout of the fleet repository (apply --facts).
            why = "not read over ssh (--no-ssh)" if repo.side is not None else repo.note
            return HostView(error=why)
        assert repo.side is not None
        now = time.monotonic()
        with self._lock:
            cached = self._facts.get(host)
            if cached is not None and now - cached[0] < self.options.facts_ttl:
                return cached[1]
        fleet = self.loaded.fleet
        ours = [n for n in deploy_units(fleet) if unit_service(fleet, n).host == host]
        view = revisions.remote_facts(repo.side, host, ours, timeout=self.options.host_timeout)
        with self._lock:
            self._facts[host] = (now, view)
        return view

    def _reading(self, name: str) -> Reading:
        fleet = self.loaded.fleet
        service = unit_service(fleet, name)
        if service.health.path == TCP_HEALTH:  # an RPC worker: its port, not HTTP
            # Never a connection from here: the worker serves one client at a time and its
            # queue holds one more (gate.listening). Its host's facts say whether it listens.
            return Reading("unknown", "an RPC worker speaks no HTTP: its host's facts tell")
        if self._on_host(name):
            # Never asked from here: this machine's loopback is not the host's (L-33).
            return Reading("unknown", "judged on its host: not read over HTTP from here")
        runtime = None if service.runtime is None else fleet.runtimes[service.runtime].kind
        # A keyed server (every one beyond loopback, L-58) answers /metrics, /slots and
        # /props with its key only.
        with http.client(
            timeout=self.options.timeout, key=service_key(self.loaded, name)
        ) as client:
            return read(
                client,
                base_url(self.loaded, name),
                runtime=runtime,
                health_path=service.health.path,
                metrics_on=service.metrics_on,
            )

    def _with_workers(self, row: ServiceRow, rows: dict[str, ServiceRow]) -> ServiceRow:
        """A server split over RPC workers is unhealthy while one of them is not: its next
        request needs the layers that worker holds. A worker's state is its own row (its
        host's facts); a worker whose host was not read is asked from here."""
        fleet = self.loaded.fleet
        service = fleet.services.get(row.service)
        if service is None or not service.rpc or row.state not in {"healthy", "contract-failing"}:
            return row
        lost = []
        for index, worker in enumerate(service.rpc):
            unit = worker_unit(row.service, worker.host)
            mine = rows.get(unit)
            if mine is not None:
                if mine.state != "healthy":
                    address = endpoints(fleet, row.service)[index]
                    lost.append(
                        f"rpc worker on {worker.host} ({address}) is unreachable: {mine.state}"
                        + (f" ({mine.detail})" if mine.detail else "")
                    )
                continue
            found = worker_states(fleet, row.service)[index]
            if not found.reachable:
                lost.append(found.message)
        if not lost:
            return row
        return replace(row, state="unhealthy", detail="; ".join(lost))

    def _members(self, name: str) -> dict[str, str] | str:
        """A swap group's members and whether each is loaded (the router's GET /models)."""
        fleet = self.loaded.fleet
        if self._on_host(name):
            return "its router is judged on its host, not reachable from here"
        aliases = [s.model_id(n) for n, s in members(fleet, name).items()]
        return member_states(base_url(self.loaded, name), aliases, self.options.timeout)

    def _gateway(self) -> FrontRow | None:
        """The front door's row: asked of LiteLLM itself (status.frontdoor)."""
        if self.loaded.fleet.gateway is None:
            return None
        with http.client(timeout=self.options.timeout) as client:
            return read_gateway(self.loaded, client, master_key(self.loaded))

    def _proxy(self, repo: RepoState, views: Mapping[str, Future[HostView]]) -> FrontRow | None:
        """The auth proxy's row: Caddy's own /healthz, then its upstreams through it.

        A proxy on another host under ``tls internal`` is asked with its CA's root as its
        host's facts (over ssh) carry it. ``views`` were submitted before this task, so
        waiting on one never waits on a task still queued behind it.
        """
        fleet = self.loaded.fleet
        proxy = fleet.proxy
        if proxy is None:
            return None
        root, note = None, ""
        if proxy.tls == "internal" and not fleet.hosts[proxy.host].is_local(proxy.host):
            asked = views.get(proxy.host)
            view = asked.result() if asked is not None else self._host_view(repo, proxy.host)
            root = view.proxy_root
            note = view.error or "its host has none yet (has the proxy started there?)"
        return read_proxy(self.loaded, proxy_key(self.loaded), remote_root=root, remote_note=note)

    def _local(self, name: str) -> Local:
        try:
            return Local.of_state(self.loaded, name)
        except FleetError as exc:
            # A corrupt record or an unreadable unit is this row's problem, not the table's.
            return Local("unknown", detail=f"cannot read its state here: {exc.render()}")


def _with_members(row: ServiceRow, states: dict[str, str] | str | None) -> ServiceRow:
    """A group's row names its loaded members where a single service names its model."""
    if states is None or row.state not in {"healthy", "contract-failing"}:
        return row
    if isinstance(states, str):
        return replace(row, notes=[*row.notes, f"members not read: {states}"])
    return replace(row, members=states, model=group_summary(states))


# What a held service reads as when nothing of it answers: held on purpose, not broken.
_DOWN_STATES = frozenset({"stopped", "down", "unreachable", "stale", "unknown"})


def _with_hold(row: ServiceRow, hold: Hold | None) -> ServiceRow:
    """A service held down (stop --hold) reads ``held`` with the hold's reason, not a problem;
    one that runs anyway keeps its state, with the hold noted."""
    if hold is None:
        return row
    if row.state in _DOWN_STATES:
        return replace(row, state="held", detail=hold.describe())
    return replace(row, notes=[*row.notes, f"{hold.describe()}, but it runs"])


def collect(
    loaded: LoadedFleet,
    hosts: Sequence[str] | None = None,
    *,
    options: Options | None = None,
) -> FleetStatus:
    """One status of the fleet (or of ``hosts``); unknown host names are a UsageError."""
    return Collector(loaded, options).collect(hosts)
