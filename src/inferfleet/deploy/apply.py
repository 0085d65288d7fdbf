"""``inferfleet apply``: on the host, bring its services to a revision, one gated service at a time.

Facts -> plan -> actions -> execute, under the host's lock:

1. refuse a dirty checkout; with ``--pull``, ``git pull --ff-only`` and
   check that HEAD is the revision the deployer pushed;
2. plan from the markers (new, changed, retired services);
3. per service, in fleet order: gates, stop, install, start, health, the
   contract probe, and only then its marker (L-41).

The first failure stops the run: the failed service and every later one keep
their markers, and the result says which are done, which failed (with the
service's last log lines) and which are pending (L-40). A service that is
healthy but fails its contract probe stops the run the same way (drain
included): it stays running, its marker records the revision with
``contract: failing``, and the result's outcome is ``contract-failing``
(exit code :data:`~inferfleet.errors.EXIT_CONTRACT`) with the evidence.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from inferfleet import paths
from inferfleet.deploy import noop, planner
from inferfleet.deploy.errors import GitError
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.holds import HoldStore
from inferfleet.deploy.inputs import FleetAtRevision
from inferfleet.deploy.lock import LOCK_NAME, HostLock
from inferfleet.deploy.markers import Marker, MarkerStore
from inferfleet.deploy.state import Emit, ServiceState
from inferfleet.documents import ApplyDocument, Failure
from inferfleet.errors import ContractFailingError, FleetError, UsageError
from inferfleet.fleetfile.groups import is_unit, unit_service

if TYPE_CHECKING:
    from inferfleet.deploy.actions import Action
    from inferfleet.deploy.execute import Verdict
    from inferfleet.render.facts import HostFacts

APPLY_SCHEMA: Final = "inferfleet.apply/v1"
OUTCOME_OK = "ok"
OUTCOME_FAILED = "failed"
OUTCOME_CONTRACT_FAILING = "contract-failing"


@dataclass(frozen=True)
class ApplyOptions:
    host: str
    services: tuple[str, ...] = ()
    drain: bool = False
    revision: str | None = None  # apply this revision instead of HEAD (rollback)
    pull: bool = False
    expect: str | None = None  # with pull: the revision HEAD must be afterwards
    dry_run: bool = False


@dataclass
class Outcome:
    service: str
    outcome: str  # deployed | kept | retired | contract-failing
    seconds: float = 0.0
    healthy_after_s: float | None = None
    contract: str = ""  # passed | failing | skipped; "" when not probed (retired, kept)
    evidence: list[str] = field(default_factory=list)  # the failed contract checks
    # Files put back from the archive ({"entry", "path"}): a rollback of a retired service.
    restored: list[dict[str, str]] = field(default_factory=list)


@dataclass
class ApplyResult:
    host: str
    revision: str = ""
    plan: list[planner.PlanItem] = field(default_factory=list)
    selected: list[str] = field(default_factory=list)
    done: list[Outcome] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    failed: Failure | None = None
    actions: list[Action] = field(default_factory=list)
    dry_run: bool = False
    # What was applied, for the no-op memo (not part of the document).
    fleet_at: FleetAtRevision | None = field(default=None, repr=False)
    state_dir: Path = field(default=Path(), repr=False)
    root: Path = field(default=Path(), repr=False)  # the fleet file's folder at that revision

    @property
    def ok(self) -> bool:
        return self.failed is None

    @property
    def outcome(self) -> str:
        """ok | failed | contract-failing (deployed and healthy, but its contract fails)."""
        if self.failed is None:
            return OUTCOME_OK
        if self.failed["error"] == ContractFailingError.__name__:
            return OUTCOME_CONTRACT_FAILING
        return OUTCOME_FAILED

    def to_json(self) -> ApplyDocument:
        return ApplyDocument(
            schema=APPLY_SCHEMA,
            host=self.host,
            revision=self.revision,
            dry_run=self.dry_run,
            ok=self.ok,
            outcome=self.outcome,
            plan=[i.to_json() for i in self.plan],
            selected=self.selected,
            done=[dict(o.__dict__) for o in self.done],
            failed=self.failed,
            pending=self.pending,
            actions=[a.to_json() for a in self.actions],
        )


def failure_from_report(data: Mapping[str, Any]) -> Failure:
    """A failure as a host reported it (one JSON line): known keys only, all text."""

    def text(key: str) -> str:
        value = data.get(key, "")
        return value if isinstance(value, str) else str(value)

    failure = Failure(
        service=text("service"),
        error=text("error"),
        message=text("message"),
        where=text("where"),
        hint=text("hint"),
        log_tail=text("log_tail"),
    )
    evidence = data.get("evidence")
    if isinstance(evidence, list):
        failure["evidence"] = [str(line) for line in evidence]
    return failure


def failure_json(service: str | None, exc: FleetError) -> Failure:
    return Failure(
        service=service or "",
        error=type(exc).__name__,
        message=exc.message,
        where=exc.where,
        hint=exc.hint,
        log_tail=getattr(exc, "log_tail", ""),
    )


def lock_for(repo: Repo, host: str) -> HostLock:
    return HostLock(repo.git_dir() / LOCK_NAME, host)


def apply(fleet_file: Path, options: ApplyOptions, emit: Emit) -> ApplyResult:
    repo, git_dir = Repo.with_git_dir(fleet_file)
    fleet_path = repo.relative(fleet_file)
    if options.dry_run:
        return _apply(repo, fleet_file, fleet_path, options, emit)
    what = f"apply of {options.revision or 'HEAD'}" + (" after a pull" if options.pull else "")
    with HostLock(git_dir / LOCK_NAME, options.host) as lock:
        lock.acquire(what)
        result = _apply(repo, fleet_file, fleet_path, options, emit)
        if _memo_kind(options):
            _remember(git_dir, options.host, result)
        return result


def _memo_kind(options: ApplyOptions) -> bool:
    """Whether an apply of these options may leave the no-op memo (deploy/noop.py):
    a whole host brought to HEAD, as a deploy does."""
    return not (options.services or options.drain or options.dry_run or options.revision)


def _remember(git_dir: Path, host: str, result: ApplyResult) -> None:
    """After a whole-host apply: the memo of its no-op, when every service is now kept.

    The markers' signature is read before and after they are planned from, so a
    marker written meanwhile (an ``up``, a ``down``) leaves no memo. A memo is
    an optimisation: failing to write it fails nothing.
    """
    at = result.fleet_at
    try:
        if at is None or not result.ok:
            noop.forget(git_dir)
            return
        state_dir = result.state_dir
        before = noop.markers_signature(state_dir)
        markers = MarkerStore(state_dir).all()
        plan = planner.plan_host(host, at, markers, holds=HoldStore(state_dir).all())
        states = kept_states(at, plan, result.root, state_dir, markers)
        plan = planner.with_states(plan, states)
        if plan.changes() or noop.markers_signature(state_dir) != before:
            noop.forget(git_dir)
            return
        # The memo holds while the processes that serve now still run (noop.matches).
        processes = noop.processes_of({name: s.pid for name, s in states.items()})
        doc = ApplyResult(host, at.revision, plan.items).to_json()
        memo = (
            None
            if processes is None
            else noop.memo_of(
                host,
                at.fleet_path,
                at.blobs,
                at.host_files(host),
                state_dir,
                before,
                dict(doc),
                processes,
            )
        )
        if memo is None:
            noop.forget(git_dir)
        else:
            noop.write(git_dir, memo)
    except (OSError, FleetError):
        return


def _apply(
    repo: Repo, fleet_file: Path, fleet_path: str, options: ApplyOptions, emit: Emit
) -> ApplyResult:
    # Only committed revisions are applied: the marker must name what runs (L-41).
    repo.require_clean("the checkout")
    if options.pull:
        emit({"event": "pull", "detail": f"git pull --ff-only in {repo.root}"})
        repo.pull_ff_only()
    head = repo.head()
    if options.expect and head != options.expect:
        raise GitError(
            f"after the pull the checkout {repo.root} is at {head[:12]}, not at the pushed "
            f"{options.expect[:12]}",
            hint="the host's checkout must track the remote you push to (git -C "
            f"{repo.root} remote -v; git branch -vv)",
        )
    revision = head
    root = fleet_file.parent
    if options.revision is not None:
        found = repo.resolve(options.revision)
        if found is None:
            raise UsageError(
                f"revision {options.revision} is not in the checkout {repo.root}",
                hint="roll back to a revision the host has pulled (see the marker's history)",
            )
        revision = found
    at = planner.fleet_at(repo, revision, fleet_path)
    host = at.fleet.hosts.get(options.host)
    if host is None:
        raise UsageError(
            f"host {options.host!r} is not in {fleet_path} at {revision[:12]}",
            hint=f"hosts there: {', '.join(sorted(at.fleet.hosts)) or '(none)'}",
        )
    state_dir = paths.state_dir(host)
    if revision != head:
        exported = repo.export(revision, state_dir / "revisions" / revision)
        root = (exported / fleet_path).parent

    markers = MarkerStore(state_dir).all()
    plan = planner.plan_host(
        options.host,
        at,
        markers,
        inputs_at=_inputs_at(repo, fleet_path),
        holds=HoldStore(state_dir).all(),
    )
    # Markers say what was deployed; the facts say whether it still runs (a held
    # service is planned HELD, never KEEP, so the facts leave it down).
    plan = planner.with_states(plan, kept_states(at, plan, root, state_dir, markers))
    chosen = planner.select(plan, services=options.services, drain=options.drain)
    result = ApplyResult(
        options.host, revision, plan.items, [i.service for i in chosen], dry_run=options.dry_run
    )
    result.fleet_at, result.state_dir, result.root = at, state_dir, root
    held = {i.service: "; ".join(i.reasons) for i in plan.items if i.action == planner.HELD}
    emit(
        {
            "event": "plan",
            "host": options.host,
            "revision": revision,
            "selected": result.selected,
            "held": held,
        }
    )
    if not chosen:
        _gateway_step(at, root, options, state_dir, result, emit)
        return result
    # Imported only when there is work: a no-op apply (most hosts of most
    # deploys) does not pay for the renderers, backends and HTTP client.
    from inferfleet.deploy import execute
    from inferfleet.deploy.facts import host_facts

    ctx = execute.Context(options.host, revision, at, root, host_facts(root), state_dir, emit)
    for index, item in enumerate(chosen):
        started = time.monotonic()
        try:
            actions, done = execute.apply_item(ctx, item, markers, dry_run=options.dry_run)
        except FleetError as exc:
            result.failed = failure_json(item.service, exc)
            result.pending = [i.service for i in chosen[index + 1 :]]
            emit({"event": "failed", **result.failed, "pending": result.pending})
            break
        result.actions += actions
        if done is not None:
            verdict = done.contract
            outcome = Outcome(
                item.service,
                done.outcome,
                round(time.monotonic() - started, 3),
                done.healthy_after_s,
                "" if verdict is None else verdict.state,
                [] if verdict is None else list(verdict.evidence),
                list(done.restored),
            )
            result.done.append(outcome)
            emit({"event": "done", **outcome.__dict__})
            if verdict is not None and verdict.failing:
                # Deployed (healthy, recorded) but not done: the run stops here as at
                # a failed health gate, later services stay pending (L-40).
                result.failed = failure_json(item.service, contract_failure(item.service, verdict))
                result.failed["evidence"] = list(verdict.evidence)
                result.pending = [i.service for i in chosen[index + 1 :]]
                emit({"event": "failed", **result.failed, "pending": result.pending})
                break
    _gateway_step(at, root, options, state_dir, result, emit)
    return result


def kept_states(
    at: FleetAtRevision,
    plan: planner.HostPlan,
    root: Path,
    state_dir: Path,
    markers: Mapping[str, Marker],
) -> dict[str, ServiceState]:
    """The decided state of each service the markers alone would keep (read, never changed)."""
    kept = [i.service for i in plan.items if i.action == planner.KEEP]
    if not kept:
        return {}
    # Only when something is kept: reading facts loads psutil and the HTTP client.
    from inferfleet.deploy.facts import gather, host_facts, system_become
    from inferfleet.deploy.state import decide

    facts = host_facts(root)
    become = system_become(at.fleet, plan.host)
    found: dict[str, ServiceState] = {}
    for name in kept:
        endpoint = _endpoint(at, name)
        read = gather(name, facts, state_dir, markers.get(name), endpoint=endpoint, become=become)
        found[name] = decide(read)
    return found


def _gateway_step(
    at: FleetAtRevision,
    root: Path,
    options: ApplyOptions,
    state_dir: Path,
    result: ApplyResult,
    emit: Emit,
) -> None:
    """The gateway, then the auth proxy in front of it, each on its own host, after the run's
    services are healthy.

    Only when nothing failed (their backends are up) and only on their own
    host; one whose digest is unchanged and that answers is kept as it is.
    """
    if options.dry_run or result.failed is not None or options.services:
        return
    here = [name for name, host in at.fleet.front_door.items() if host == options.host]
    if not here:
        return  # a host without a front door loads none of its machinery
    from inferfleet.deploy import frontdoor
    from inferfleet.deploy.facts import host_facts

    for name in here:
        started = time.monotonic()

        def note(text: str, kind: str = name) -> None:
            emit({"event": "step", "kind": kind, "detail": text})

        try:
            done = frontdoor.deploy(
                at.fleet,
                host_facts(root),
                state_dir,
                name,
                at=at,
                root=root,
                note=note,
            )
        except FleetError as exc:
            result.failed = failure_json(name, exc)
            emit({"event": "failed", **result.failed, "pending": []})
            return
        outcome = Outcome(
            name,
            "kept" if done["action"] == "unchanged" else "deployed",
            round(time.monotonic() - started, 3),
            done["seconds_to_healthy"],
        )
        result.done.append(outcome)
        emit({"event": "done", **outcome.__dict__})


def contract_failure(service: str, verdict: Verdict) -> ContractFailingError:
    """The error a contract-failing service reports: its first evidence line, all of it below."""
    evidence: list[str] = list(verdict.evidence) or ["the contract probe failed"]
    return ContractFailingError(
        f"healthy, but its contract probe fails: {evidence[0]}",
        where=f"service {service}",
        hint="it runs and its marker says 'contract: failing'; fix the fleet file or the "
        "runtime so the server honours what the fleet file declares (L-25), then apply again"
        + ("; evidence: " + " | ".join(evidence[1:]) if len(evidence) > 1 else ""),
    )


def _inputs_at(repo: Repo, fleet_path: str) -> planner.InputsAt:
    def inputs_at(revision: str) -> dict[str, Any] | None:
        if repo.resolve(revision) is None:
            return None
        try:
            return dict(planner.fleet_at(repo, revision, fleet_path).inputs)
        except FleetError:
            return None

    return inputs_at


FACTS_SCHEMA = "inferfleet.facts/v1"


def _endpoint(at: FleetAtRevision, name: str) -> tuple[str, int, str] | None:
    """Where the fleet says the service listens (to see a stranger on a stopped service's port)."""
    if not is_unit(at.fleet, name):
        return None
    service = unit_service(at.fleet, name)  # a swap group's router, too
    return (service.bind, service.port, service.health.path)


def host_report(
    fleet_file: Path, host_name: str, services: tuple[str, ...] = (), *, states: bool = True
) -> dict[str, Any]:
    """What ``plan`` and ``deploy --dry-run`` need from a host, read without changing anything."""
    repo = Repo.containing(fleet_file)
    fleet_path = repo.relative(fleet_file)
    head = repo.head()
    at = planner.fleet_at(repo, head, fleet_path)
    host = at.fleet.hosts.get(host_name)
    if host is None:
        raise UsageError(
            f"host {host_name!r} is not in the checkout's {fleet_path} at {head[:12]}",
            hint="deploy once so the host's checkout knows it",
        )
    state_dir = paths.state_dir(host)
    markers = MarkerStore(state_dir).all()
    holder = lock_for(repo, host_name).holder()
    report: dict[str, Any] = {
        "schema": FACTS_SCHEMA,
        "host": host_name,
        "head": head,
        "dirty": repo.dirty(),
        "state_dir": str(state_dir),
        "lock": None if holder is None else holder.describe(),
        "markers": {n: m.to_json() for n, m in markers.items()},
        "holds": {n: h.to_json() for n, h in HoldStore(state_dir).all().items()},
        "facts": None,
        "states": {},
        "retired": _retired(state_dir, [s for s in services if s not in markers]),
    }
    if states:
        # What runs now, for the services asked about and those with markers
        # here; `plan` needs the markers only and skips this (and its imports).
        from inferfleet.deploy.facts import gather, host_facts, system_become
        from inferfleet.deploy.state import decide

        facts = host_facts(fleet_file.parent)
        become = system_become(at.fleet, host_name)
        names = sorted(set(services) | {n for n, m in markers.items() if m.host == host_name})
        report["facts"] = asdict(facts)
        report["states"] = {
            n: decide(
                gather(
                    n,
                    facts,
                    state_dir,
                    markers.get(n),
                    endpoint=_endpoint(at, n),
                    settings=_settings_digests(at, n, facts, repo.root),
                    become=become,
                )
            ).to_json()
            for n in names
        }
        from inferfleet.backends.host_facts import memory_used
        from inferfleet.deploy.frontdoor import ca_root_text

        report["memory"] = memory_used()  # what status shows per host
        root = ca_root_text(at.fleet, host_name, state_dir)
        if root is not None:  # status elsewhere asks the proxy over TLS, trusting this root
            report["proxy_root"] = root
    return report


def _retired(state_dir: Path, services: list[str]) -> dict[str, str]:
    """For each of ``services`` (none has a marker), the revision it ran when a retirement
    archived its files: the newest sound ``retire`` entry's (what ``rollback`` goes back to)."""
    if not services:
        return {}
    from inferfleet.io.archive import Archive

    found: dict[str, str] = {}
    for entry in reversed(Archive(state_dir).entries()):  # newest first
        index = entry.index
        if index is None or index.reason != "retire" or not index.revision:
            continue
        if index.service in services:
            found.setdefault(index.service, index.revision)
    return found


def _settings_digests(
    at: FleetAtRevision, name: str, facts: HostFacts, checkout: Path
) -> dict[str, str]:
    """The service's settings files as apply would render them here (L-54): dest -> sha256.

    A deploy's dry run decides from these exactly as apply does; a template
    that does not render is left out here (apply reports it for the service).
    """
    from inferfleet.render.settings import render_service_settings

    service = at.fleet.services.get(name)
    if service is None or not service.settings:
        return {}
    try:
        rendered = render_service_settings(name, service, facts, forbidden=[checkout])
    except FleetError:
        return {}
    return {s.dest: s.sha256 for s in rendered}
