"""Which revision each service runs, against HEAD of the fleet repository.

Deploys record the revision a service runs in a marker on its host, outside
the checkout, once its health gate passed (L-41). This machine's markers are
read from its state dir; a remote host's come with its facts over ssh
(``inferfleet apply --facts``, the same read ``plan`` does). The deploy
planner then says whether an older revision matters: a service whose inputs
did not change since its marker is ``unchanged``, not behind (L-40).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import inferfleet
from inferfleet import paths
from inferfleet.deploy import planner
from inferfleet.deploy.holds import Hold, HoldStore
from inferfleet.deploy.markers import Marker, MarkerStore
from inferfleet.deploy.rollout import Fleetside, read_report
from inferfleet.deploy.state import ServiceState
from inferfleet.errors import FleetError
from inferfleet.fleetfile.fleet import Host
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.status.model import Revision

_PACKAGE = Path(inferfleet.__file__).resolve().parent


@dataclass(frozen=True)
class RepoState:
    side: Fleetside | None
    note: str = ""  # why revisions are not tracked, when side is None

    @property
    def head(self) -> str | None:
        return None if self.side is None else self.side.head.revision


@dataclass
class HostView:
    """A host's markers (and, over ssh, its facts); ``error`` when they could not be read."""

    markers: dict[str, Marker] = field(default_factory=dict)
    states: dict[str, ServiceState] = field(default_factory=dict)
    checkout_head: str | None = None
    lock: str | None = None
    error: str | None = None
    over_ssh: bool = False
    holds: dict[str, Hold] = field(default_factory=dict)  # services held down (stop --hold)
    # Bytes in use per device (nvidia:0, amd:1, ram) where the host can tell.
    memory: dict[str, int] = field(default_factory=dict)
    proxy_root: str | None = None  # the auth proxy's local CA root (PEM), read over ssh


def repo_state(loaded: LoadedFleet) -> RepoState:
    """The fleet repository at HEAD, or why there is none."""
    if loaded.path.resolve().is_relative_to(_PACKAGE):
        return RepoState(None, "the embedded example fleet is not deployed from a repository")
    try:
        return RepoState(Fleetside.of(loaded))
    except FleetError as exc:
        return RepoState(None, exc.message)


def local_facts(host: Host) -> HostView:
    """This machine's markers, read from its state dir."""
    try:
        state_dir = paths.state_dir(host)
        from inferfleet.backends.host_facts import memory_used

        return HostView(
            markers=MarkerStore(state_dir).all(),
            holds=HoldStore(state_dir).all(),
            memory=memory_used(),
        )
    except FleetError as exc:
        return HostView(error=exc.render())


def remote_facts(
    side: Fleetside, host: str, services: list[str], *, timeout: float = 120.0
) -> HostView:
    """A remote host's markers and its services' states over ssh; ``error`` says why not."""
    try:
        report = read_report(side, host, services, timeout=timeout)
    except FleetError as exc:
        return HostView(error=exc.message, over_ssh=True)
    return HostView(
        markers=report.markers,
        states=report.states,
        checkout_head=report.head,
        lock=report.lock,
        over_ssh=True,
        holds=report.holds,
        memory=report.memory,
        proxy_root=report.proxy_root,
    )


def revisions(repo: RepoState, host: str, names: list[str], facts: HostView) -> dict[str, Revision]:
    """Each named service's deployed revision against HEAD (one plan per host)."""
    if repo.side is None:
        return {n: Revision("untracked", reasons=[repo.note]) for n in names}
    head = repo.side.head.revision
    if facts.error is not None:
        return {n: Revision("unknown", head=head, reasons=[facts.error]) for n in names}
    plan = planner.plan_host(host, repo.side.head, facts.markers)
    found: dict[str, Revision] = {}
    for name in names:
        marker = facts.markers.get(name)
        deployed = None if marker is None else marker.revision
        applied = None if marker is None else marker.applied_at
        item = plan.item(name)
        if item is None:
            why = f"not on host {host} in the fleet file at HEAD (uncommitted change?)"
            found[name] = Revision("untracked", deployed, head, applied, [why])
        elif marker is None:
            found[name] = Revision("new", None, head, None, ["never deployed"])
        elif deployed == head:
            found[name] = Revision("current", deployed, head, applied)
        elif item.action == planner.KEEP:
            found[name] = Revision("unchanged", deployed, head, applied)
        else:
            found[name] = Revision("outdated", deployed, head, applied, list(item.reasons))
    return found
