"""Plan a host's deploy from git: which services changed since their marker (L-40).

Per host: a service with no marker is new; a service whose inputs at HEAD
differ from the inputs its marker recorded is changed (with the reasons); a
service whose marker says its contract probe failed is deployed again
("contract failing"); a
marker whose service no longer runs on the host is a retirement. A service
held down (``inferfleet stop --hold``, :mod:`inferfleet.deploy.holds`) is
``held``: left down, with the hold's reason, until ``inferfleet start``
lifts it. Everything else is kept as it runs. The plan is a pure function of the fleet at HEAD and
the host's markers; git is read once per revision, never walked commit by
commit, so a plan over thousands of commits costs what one over ten does.

Markers say what was deployed, not what runs: :func:`with_states` then reads
the host's facts, so a kept service whose process is gone, crash-looping or
replaced by a stranger on its port is deployed again, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.holds import Hold
from inferfleet.deploy.inputs import INPUTS_VERSION, FleetAtRevision, ServiceInputs, fleet_inputs
from inferfleet.deploy.markers import Marker
from inferfleet.deploy.state import CRASH_LOOPING, FOREIGN, STALE, STOPPED, ServiceState
from inferfleet.documents import PlanItem as PlanItemDoc
from inferfleet.errors import SpecError, UsageError
from inferfleet.fleetfile.groups import is_unit, unit_service
from inferfleet.fleetfile.loader import parse_fleet

DEPLOY = "deploy"
RETIRE = "retire"
KEEP = "keep"
HELD = "held"  # stopped on purpose (stop --hold): left down until `start` lifts the hold
CONTRACT_FAILING_REASON = "contract failing"
# A kept service in one of these states does not serve what its marker says: deployed again.
NOT_SERVING = {
    STOPPED: "not running",
    STALE: "not running",
    CRASH_LOOPING: "crash-looping",
    FOREIGN: "another process holds its port",
}


@dataclass(frozen=True)
class PlanItem:
    service: str
    action: str  # deploy | retire | keep | held
    reasons: list[str]
    recorded: str | None  # the revision its marker records, None for a new service

    @property
    def new(self) -> bool:
        return self.action == DEPLOY and self.recorded is None

    def to_json(self) -> PlanItemDoc:
        return PlanItemDoc(
            service=self.service, action=self.action, reasons=self.reasons, recorded=self.recorded
        )


@dataclass(frozen=True)
class HostPlan:
    host: str
    revision: str
    items: list[PlanItem] = field(default_factory=list)

    def item(self, service: str) -> PlanItem | None:
        return next((i for i in self.items if i.service == service), None)

    def changes(self) -> list[PlanItem]:
        return [i for i in self.items if i.action not in {KEEP, HELD}]


def fleet_at(repo: Repo, revision: str, fleet_path: str) -> FleetAtRevision:
    """The fleet file as committed at ``revision``, validated, with every service's inputs."""
    text = repo.show(revision, fleet_path)
    label = Path(f"{fleet_path}@{revision[:10]}")
    if text is None:
        raise SpecError(
            f"{fleet_path} does not exist at revision {revision[:10]}",
            path=label,
            hint="commit the fleet file, or pass the right one with --file",
        )
    fleet = parse_fleet(text, label)
    blobs = repo.blobs(revision)
    return FleetAtRevision(
        revision, fleet, fleet_path, fleet_inputs(fleet, fleet_path, blobs), blobs
    )


InputsAt = Callable[[str], Mapping[str, ServiceInputs] | None]


def plan_host(
    host: str,
    head: FleetAtRevision,
    markers: Mapping[str, Marker],
    *,
    inputs_at: InputsAt | None = None,
    holds: Mapping[str, Hold] | None = None,
) -> HostPlan:
    """What to do on ``host`` to run ``head``; ``inputs_at`` recomputes old inputs when needed.

    A service in ``holds`` is planned ``held`` whatever its marker says.
    """
    ours = {name: m for name, m in markers.items() if m.host == host}
    items: list[PlanItem] = []
    # Retirements first: a retired service may hold the port a new one needs.
    for name, retired in sorted(ours.items()):
        # A service that joined a swap group retires: its group runs it now.
        service = unit_service(head.fleet, name) if is_unit(head.fleet, name) else None
        if service is None or service.host != host:
            why = "removed from the fleet" if service is None else f"moved to host {service.host}"
            items.append(PlanItem(name, RETIRE, [why], retired.revision))
    for name in head.services_of(host):
        marker = ours.get(name)
        hold = (holds or {}).get(name)
        if hold is not None:
            recorded = None if marker is None else marker.revision
            items.append(PlanItem(name, HELD, [hold.describe()], recorded))
            continue
        if marker is None:
            items.append(PlanItem(name, DEPLOY, ["new service"], None))
            continue
        old = marker.inputs
        if old.version != INPUTS_VERSION:
            recomputed = None if inputs_at is None else inputs_at(marker.revision)
            if recomputed is None or name not in recomputed:
                items.append(
                    PlanItem(
                        name,
                        DEPLOY,
                        [f"recorded revision {marker.revision[:10]} cannot be compared"],
                        marker.revision,
                    )
                )
                continue
            old = recomputed[name]
        reasons = head.inputs[name].changes_since(old)
        if marker.contract_failing:
            # Deployed but failing its contract probe: never kept as fine, so a
            # later deploy (or drain) applies it again until it passes (L-41).
            reasons = [*reasons, CONTRACT_FAILING_REASON]
        items.append(PlanItem(name, DEPLOY if reasons else KEEP, reasons, marker.revision))
    return HostPlan(host, head.revision, items)


def with_states(
    plan: HostPlan, states: Mapping[str, ServiceState], *, held: Collection[str] = ()
) -> HostPlan:
    """The plan with every kept service that its facts say does not serve made a deploy.

    ``states``: the host's decided state per service (deploy.state.decide); a
    service without one stays as planned. ``held``: services held down on
    purpose, left as they are (a hold is the operator's word, not a fault).
    Executing such an item starts the service again (deploy.actions: a
    service that runs this spec and answers is only verified, never restarted).
    """
    items: list[PlanItem] = []
    for item in plan.items:
        state = states.get(item.service)
        why = None if state is None else NOT_SERVING.get(state.state)
        if item.action != KEEP or why is None or item.service in held:
            items.append(item)
            continue
        said = "" if state is None else state.detail
        detail = f": {said}" if said and said != why else ""
        reason = f"{why}{detail} (its marker is current)"
        items.append(PlanItem(item.service, DEPLOY, [reason], item.recorded))
    return HostPlan(plan.host, plan.revision, items)


def select(plan: HostPlan, *, services: Sequence[str] = (), drain: bool = False) -> list[PlanItem]:
    """The items a deploy executes, in order.

    ``services`` picks those services whatever the plan says (a kept one is
    redeployed); ``drain`` takes only services already deployed whose marker
    is behind and whose inputs changed, never a new one or a retirement (L-40).
    """
    if services:
        chosen = []
        for name in services:
            item = plan.item(name)
            if item is None:
                known = ", ".join(i.service for i in plan.items) or "(none)"
                raise UsageError(
                    f"service {name!r} does not run on host {plan.host!r}",
                    hint=f"services of {plan.host}: {known}",
                )
            if item.action == HELD:
                raise UsageError(
                    f"service {name!r} on host {plan.host!r} is {item.reasons[0]}",
                    hint=f"`inferfleet start {name}` lifts the hold and starts it",
                )
            if item.action == KEEP:
                item = PlanItem(name, DEPLOY, ["asked for with --service"], item.recorded)
            chosen.append(item)
        return chosen
    if drain:
        return [i for i in plan.items if i.action == DEPLOY and i.recorded is not None]
    return plan.changes()
