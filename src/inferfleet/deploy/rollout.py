"""The deploying side: plan, deploy and roll back hosts over ssh.

``deploy`` refuses a dirty working tree, pushes, then runs on every host at
once (services within a host stay in order) ``inferfleet apply --pull
--expect SHA`` in the host's checkout, reading its progress as JSON lines.
A host whose address is this machine (:meth:`Host.is_local`) runs ``apply``
here, in the operator's checkout, through the local connector: no ssh, no
push or pull for it (when every host is local nothing is pushed).
``plan`` and ``deploy --dry-run`` change nothing anywhere: they read each
host's markers and facts (``inferfleet apply --facts``) and decide here with
the same functions the host would use.
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field, StringConstraints, TypeAdapter, ValidationError

from inferfleet.deploy import planner
from inferfleet.deploy.apply import failure_from_report, failure_json
from inferfleet.deploy.errors import RemoteError, SshError
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.holds import MAX_REASON, Hold
from inferfleet.deploy.inputs import FleetAtRevision
from inferfleet.deploy.markers import Marker, MarkerError
from inferfleet.deploy.ssh import Connector, connector_for, quote_path
from inferfleet.deploy.state import STATES, ServiceState
from inferfleet.doctor.parse import clean
from inferfleet.documents import Failure
from inferfleet.errors import FleetError, ProcessError, UsageError
from inferfleet.fleetfile.fleet import Fleet, Host
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.fleetfile.rpc import worker_hosts_first
from inferfleet.io.files import private_dir

if TYPE_CHECKING:
    from inferfleet.deploy.actions import Action

OnEvent = Callable[[str, dict[str, Any]], None]
REMOTE_TIMEOUT = 6 * 3600.0  # a deploy may wait out several slow model loads
# A facts report is a few kB per service; a host that prints more is not answering.
MAX_REPORT_BYTES = 4 * 1024 * 1024


def remote_command(host: Host | None = None) -> str:
    """How to run inferfleet on a host, as a word of its shell.

    ``INFERFLEET_REMOTE_COMMAND`` when set; else the host's own venv
    (``venv:``, what ``inferfleet host bootstrap`` makes) when it holds
    inferfleet there, else ``inferfleet`` on the host's PATH.
    """
    override = os.environ.get("INFERFLEET_REMOTE_COMMAND")
    if override:
        return override
    if host is None:
        return "inferfleet"
    program = quote_path(host.venv.rstrip("/") + "/bin/inferfleet")
    return f'"$(p={program}; [ -x "$p" ] && echo "$p" || echo inferfleet)"'


@dataclass
class Fleetside:
    """The operator's repository, fleet file and the revision being deployed."""

    repo: Repo
    fleet_path: str  # repository path of the fleet file
    loaded: LoadedFleet  # the working tree's fleet (hosts, checkouts)
    revision: str  # HEAD
    command: str = field(default_factory=remote_command)
    _head: FleetAtRevision | None = None
    offline: bool = False  # each host's apply runs with --offline too

    @classmethod
    def of(cls, loaded: LoadedFleet) -> Fleetside:
        repo = Repo.containing(loaded.path)
        return cls(repo, repo.relative(loaded.path), loaded, repo.head())

    @property
    def head(self) -> FleetAtRevision:
        """The fleet as committed at HEAD with every service's inputs (read when planning).

        A deploy with -y never needs it: it refuses a dirty tree, so the working
        tree's fleet is HEAD's, and the hosts plan for themselves.
        """
        if self._head is None:
            self._head = planner.fleet_at(self.repo, self.revision, self.fleet_path)
        return self._head

    @property
    def fleet(self) -> Fleet:
        return self.loaded.fleet

    def hosts(self, names: Sequence[str]) -> list[str]:
        fleet = self.fleet
        for name in names:
            if name not in fleet.hosts:
                raise UsageError(
                    f"no host named {name!r} in {self.fleet_path} at HEAD",
                    hint=f"hosts: {', '.join(sorted(fleet.hosts)) or '(none)'}",
                )
        return list(names) or list(fleet.hosts)

    def connector(self, host: str) -> Connector:
        """The host's connector; a local host runs apply here, in this repository."""
        return connector_for(host, self.fleet.hosts[host], repository=self.repo.root)

    def local(self, host: str) -> bool:
        """Whether ``host`` is this machine (apply runs in this checkout: nothing to push)."""
        return self.fleet.hosts[host].is_local(host)

    def command_for(self, host: str) -> str:
        """How inferfleet runs on ``host`` (the override, else its venv, else PATH)."""
        return remote_command(self.fleet.hosts[host]) if host in self.fleet.hosts else self.command

    def apply_command(self, conn: Connector, host: str, *args: str) -> str:
        """The shell line that runs ``inferfleet apply`` in the host's checkout.

        Where and how is the connector's (a local host: this repository, this
        interpreter, no ``--pull``). A missing checkout answers with the same
        JSON error line apply would print, so the deployer can say what to do
        instead of "exit status 2".
        """
        if not conn.pulls:
            args = tuple(a for a in args if a != "--pull")
        if self.offline:
            args = (*args, "--offline")
        checkout = self.fleet.hosts[host].checkout
        missing = json.dumps(
            {
                "event": "error",
                "error": "NoCheckout",
                "message": f"there is no checkout of the fleet repository at {checkout}",
                "where": f"host {host}",
                "hint": _no_checkout_hint(host, checkout),
            }
        )
        return self.verb_command(conn, host, "apply", *args, missing=f"echo {shlex.quote(missing)}")

    def verb_command(
        self, conn: Connector, host: str, verb: str, *args: str, missing: str = ""
    ) -> str:
        """The shell line that runs ``inferfleet VERB --file F --host HOST ARGS`` in the host's
        checkout (``stop``, ``start``, ``restart``, ``logs`` as ``apply``). Without a checkout
        there, ``missing`` runs (default: an error line on stderr), then it exits 2."""
        checkout = self.fleet.hosts[host].checkout
        if not missing:
            text = (
                f"error: there is no checkout of the fleet repository at {checkout} on {host} "
                f"-- {_no_checkout_hint(host, checkout)}"
            )
            missing = f"echo {shlex.quote(text)} >&2"
        argv = [verb, "--file", self.fleet_path, "--host", host, *args]
        run = " ".join(shlex.quote(a) for a in argv)
        return (
            f"cd {conn.workdir(checkout)} 2>/dev/null || {{ {missing}; exit 2; }}"
            f" && {conn.program(self.command_for(host))} {run}"
        )


def _no_checkout_hint(host: str, checkout: str) -> str:
    return (
        f"run `inferfleet host bootstrap {host}` here, or clone it there once "
        f"(git clone REMOTE {checkout}), or set the host's checkout: in the fleet file"
    )


@dataclass
class HostReport:
    """A host's facts as ``inferfleet apply --facts`` reported them."""

    host: str
    head: str
    lock: str | None
    facts: dict[str, str] | None  # HostFacts fields, present when states were asked for
    markers: dict[str, Marker]
    states: dict[str, ServiceState]
    # A retired service asked about -> the revision it ran when retired (its archive entry).
    retired: dict[str, str] = field(default_factory=dict)
    holds: dict[str, Hold] = field(default_factory=dict)  # services held down there
    memory: dict[str, int] = field(default_factory=dict)  # bytes in use per device there
    proxy_root: str | None = None  # the auth proxy's local CA root (PEM), when it runs there

    @classmethod
    def from_json(cls, doc: Any, *, host: str = "") -> HostReport:
        """A host's report, checked by shape: what a host sends is input like any other."""
        try:
            raw = _REPORT.validate_python(doc)
            facts = raw.facts
            if facts is not None:
                from inferfleet.render.facts import HostFacts  # only dry runs send facts

                HostFacts(**facts)  # every key a known fact, every value text
            known = set(ServiceState.__dataclass_fields__)
            states = {
                n: _printable_state(
                    _STATE.validate_python({k: v for k, v in s.items() if k in known})
                )
                for n, s in raw.states.items()
            }
            markers = {n: Marker.from_json(m) for n, m in raw.markers.items()}
            holds = {n: _HOLD.validate_python(h) for n, h in raw.holds.items()}
            bad = [n for n, h in holds.items() if n != h.service or not _printable(h.reason)]
            if bad:
                raise TypeError(f"holds of {', '.join(bad)} do not name their service in print")
        except (ValidationError, TypeError, MarkerError) as exc:
            why = exc.message if isinstance(exc, MarkerError) else str(exc).splitlines()[0]
            raise RemoteError(
                f"host {host or '?'} sent a facts report this inferfleet cannot read: {why}",
                where=f"host {host}" if host else "",
                hint="run the same inferfleet version on the host as here (update its "
                "checkout and reinstall there), then plan again",
            ) from None
        return cls(
            raw.host, raw.head, raw.lock, facts, markers, states, dict(raw.retired), holds,
            dict(raw.memory), raw.proxy_root,
        )  # fmt: skip


def _printable_state(state: ServiceState) -> ServiceState:
    """A host's state of a service, as text this side prints: one of the known states, its
    free text (a process's command line, a version) printable and bounded."""
    if state.state not in STATES:
        raise TypeError(f"unknown service state {clean(state.state, 40)!r}")
    return replace(
        state,
        detail=clean(state.detail, 400),
        runtime_version=clean(state.runtime_version, 120),
    )


MAX_PROXY_ROOT = 16 * 1024  # one PEM certificate is about 1 KiB
_PEM_CERTIFICATE = (
    r"^-----BEGIN CERTIFICATE-----\r?\n(?:[A-Za-z0-9+/=]{1,76}\r?\n)+"
    r"-----END CERTIFICATE-----\r?\n?$"
)


class _RawReport(BaseModel):
    """The keys of ``apply --facts`` this side reads (documents.FactsDocument)."""

    host: str
    head: str
    lock: str | None = None
    facts: dict[str, str] | None = None
    markers: dict[str, dict[str, Any]] = {}
    states: dict[str, dict[str, Any]] = {}
    retired: dict[str, Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40,64}$")]] = {}
    holds: dict[str, dict[str, Any]] = {}
    memory: dict[
        Annotated[str, StringConstraints(pattern=r"^(?:(?:nvidia|amd):[0-9]{1,3}|ram)$")],
        Annotated[int, Field(ge=0, le=1 << 60)],
    ] = {}
    # One PEM certificate: base64 lines between its markers, nothing else (it becomes the
    # only root a TLS connection from here trusts).
    proxy_root: (
        Annotated[str, StringConstraints(max_length=MAX_PROXY_ROOT, pattern=_PEM_CERTIFICATE)]
        | None
    ) = None


_REPORT = TypeAdapter(_RawReport)
_STATE = TypeAdapter(ServiceState)
_HOLD = TypeAdapter(Hold)


def read_report(
    side: Fleetside,
    host: str,
    services: Sequence[str] = (),
    *,
    states: bool = True,
    timeout: float = 120.0,
) -> HostReport:
    """A host's markers, lock and (with ``states``) what runs there, read over ssh.

    One round trip; what the host prints is input: at most ``MAX_REPORT_BYTES``
    read, within ``timeout`` seconds, then checked by shape (HostReport.from_json).
    """
    args = ["--facts", *(a for s in services for a in ("--service", s))]
    if not states:
        args.append("--no-states")
    conn = side.connector(host)
    try:
        done = conn.run(
            side.apply_command(conn, host, *args),
            timeout=timeout,
            check=False,
            limit=MAX_REPORT_BYTES,
        )
    except ProcessError as exc:  # too slow or too large (io.process)
        raise SshError(
            f"host {host} did not send its facts: {exc.message}",
            where=f"host {host}",
            hint="check that inferfleet runs there (ssh to it and run `inferfleet apply --facts`)",
        ) from None
    doc = _last_json(done.stdout)
    if done.returncode != 0 or doc is None:
        raise _remote_failure(host, done.stdout + done.stderr, doc)
    return HostReport.from_json(doc, host=host)


@dataclass
class HostPlanResult:
    host: str
    plan: planner.HostPlan | None = None
    selected: list[planner.PlanItem] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    lock: str | None = None
    error: Failure | None = None


def plan_hosts(
    side: Fleetside,
    hosts: Sequence[str],
    *,
    services: Sequence[str] = (),
    drain: bool = False,
    actions: bool = False,
) -> list[HostPlanResult]:
    """Plans (and with ``actions``, the exact actions) for each host, read in parallel."""
    head = side.head  # read once here, not by every host's thread

    def one(host: str) -> HostPlanResult:
        out = HostPlanResult(host)
        try:
            # What runs there too, not only the markers: a kept service whose process
            # is gone is planned as a deploy, as the host's own apply plans it.
            report = read_report(side, host, head.services_of(host))
            out.lock = report.lock
            plan = planner.plan_host(host, head, report.markers, holds=report.holds)
            out.plan = planner.with_states(plan, report.states)
            out.selected = planner.select(out.plan, services=services, drain=drain)
            if actions:
                out.actions = _actions_here(side, report, out.selected)
        except FleetError as exc:
            out.error = failure_json(None, exc)
        return out

    return _parallel(hosts, one)


def _actions_here(
    side: Fleetside, report: HostReport, chosen: list[planner.PlanItem]
) -> list[Action]:
    """The host's actions, decided here from its facts (exactly what apply would decide)."""
    # Only a dry run needs the renderers and gates on this side.
    from inferfleet.deploy.actions import retire_actions, service_actions
    from inferfleet.deploy.gates import gates_for
    from inferfleet.deploy.rpc import shape_reader
    from inferfleet.render.facts import HostFacts
    from inferfleet.render.pipeline import service_launch

    fleet = side.head.fleet
    root = _tree_at_head(side)
    found: list[Action] = []
    for item in chosen:
        state = report.states.get(item.service, ServiceState(item.service))
        if item.action == planner.RETIRE:
            found += retire_actions(report.markers[item.service], state)
            continue
        assert report.facts is not None
        facts = HostFacts(**report.facts)
        desired = service_launch(
            fleet,
            root,
            item.service,
            facts,
            shape_of=shape_reader(fleet, root / PurePosixPath(side.head.fleet_path).name),
        )
        gates = gates_for(desired, fleet, root, facts)
        found += service_actions(desired, state, gates, side.revision)
    return found


def _tree_at_head(side: Fleetside) -> Path:
    """The fleet file's folder as committed (the working tree itself when it is clean).

    An export lives in a private folder (ours, mode 0700, not a symlink):
    in a shared /tmp another user could otherwise plant the tree a dry run
    plans from.
    """
    if not side.repo.dirty():
        return (side.repo.root / side.fleet_path).parent
    base = private_dir(
        Path(tempfile.gettempdir()) / f"inferfleet-tree-{os.getuid()}",
        error=UsageError,
        hint="remove it (it only caches exported revisions); it is made again, private",
    )
    folder = base / side.revision
    side.repo.export(side.revision, folder)
    return (folder / side.fleet_path).parent


@dataclass
class HostRun:
    host: str
    result: dict[str, Any] | None = None  # the host's apply document
    error: Failure | None = None  # why it failed, when it did

    @property
    def ok(self) -> bool:
        return self.error is None and self.result is not None and bool(self.result.get("ok"))


def deploy(
    side: Fleetside,
    hosts: Sequence[str],
    *,
    services: Sequence[str] = (),
    drain: bool = False,
    on_event: OnEvent | None = None,
) -> list[HostRun]:
    """Push, then apply on every host in parallel; returns one run per host."""
    side.repo.require_clean("the working tree")
    if not all(side.local(h) for h in hosts):
        side.repo.push()  # a local host applies from this very checkout
    args = ["--pull", "--expect", side.revision, "--events"]
    if drain:
        args.append("--drain")
    for name in services:
        args += ["--service", name]
    # RPC workers' hosts first: a split server starts once its workers answer.
    first, then = worker_hosts_first(side.head.fleet, list(hosts))
    runs = {}
    for wave in (first, then):
        for run in _parallel(wave, lambda host: run_apply(side, host, args, on_event)):
            runs[run.host] = run
    return [runs[host] for host in hosts]


def rollback(
    side: Fleetside, service: str, *, to: str | None, host: str | None, on_event: OnEvent | None
) -> HostRun:
    """Apply one service on its host as of an earlier revision, gated like any deploy."""
    if host is None:
        found = side.head.fleet.services.get(service)
        if found is None:
            raise UsageError(
                f"service {service!r} is not in the fleet at HEAD",
                hint="name its host with --host to roll back a service that was removed",
            )
        host = found.host
    side.hosts([host])
    if to is None:
        report = read_report(side, host, [service], states=False)
        marker = report.markers.get(service)
        if marker is not None and marker.history:
            to = marker.history[0]
        elif marker is None and service in report.retired:
            # Retired: back to the revision it ran then, as its archive entry recorded it.
            to = report.retired[service]
        else:
            raise UsageError(
                f"host {host} has no earlier revision recorded for {service!r}",
                hint="name the revision with --to REV (a retired service's is in "
                "`inferfleet archive list` on the host)",
            )
    args = ["--service", service, "--rev", to, "--events"]
    return run_apply(side, host, args, on_event)


def run_apply(side: Fleetside, host: str, args: list[str], on_event: OnEvent | None) -> HostRun:
    run = HostRun(host)

    def on_line(line: str) -> None:
        doc = _json_line(line)
        if doc is None:
            if on_event is not None and line.strip():
                on_event(host, {"event": "output", "line": line})
            return
        if doc.get("event") == "result":
            run.result = doc.get("result")
        elif doc.get("event") == "error":
            run.error = failure_from_report(doc)
        if on_event is not None:
            on_event(host, doc)

    try:
        conn = side.connector(host)
        done = conn.stream(side.apply_command(conn, host, *args), on_line, timeout=REMOTE_TIMEOUT)
    except FleetError as exc:
        run.error = failure_json(None, exc)
        return run
    if run.result is None and run.error is None and done.returncode == 127:
        run.error = failure_json(
            None,
            RemoteError(
                f"inferfleet is not installed on {host} (`{side.command_for(host)}`: "
                "command not found)",
                where=f"host {host}",
                hint=f"install it there with `inferfleet host bootstrap {host}`, or name it "
                "with INFERFLEET_REMOTE_COMMAND (e.g. ~/.local/bin/inferfleet)",
            ),
        )
    if run.result is None and run.error is None:
        tail = "\n".join(done.stdout.strip().splitlines()[-10:])
        run.error = failure_json(
            None,
            RemoteError(
                f"inferfleet apply on {host} ended (status {done.returncode}) without a result",
                where=f"host {host}",
                hint="check that inferfleet is installed there (INFERFLEET_REMOTE_COMMAND "
                "names it) and read its output below",
                log_tail=tail,
            ),
        )
    return run


def _printable(text: str) -> bool:
    return text.isprintable() and len(text) <= MAX_REASON


def _parallel(hosts: Sequence[str], fn: Callable[[str], Any]) -> list[Any]:
    if len(hosts) <= 1:
        return [fn(h) for h in hosts]
    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        return list(pool.map(fn, hosts))


def _json_line(line: str) -> dict[str, Any] | None:
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _last_json(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        doc = json.loads(text[start:])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _remote_failure(host: str, output: str, doc: dict[str, Any] | None) -> FleetError:
    if doc is not None and doc.get("event") == "error":
        return RemoteError(
            clean(doc.get("message", ""), 1000),
            where=clean(doc.get("where") or f"host {host}", 200),
            hint=clean(doc.get("hint", ""), 1000),
        )
    tail = " | ".join(clean(line, 200) for line in output.strip().splitlines()[-8:])
    return SshError(
        f"inferfleet on {host} did not answer with its facts: {tail}",
        where=f"host {host}",
        hint="check that inferfleet is installed there and INFERFLEET_REMOTE_COMMAND names it",
    )
