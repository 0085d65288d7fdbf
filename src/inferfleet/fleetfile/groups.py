"""Swap groups: several llama.cpp services behind one llama-server in router mode.

A service joins a group with ``group: NAME``; the ``groups:`` section holds
what the router decides for all of them: how many members are
loaded at once (``--models-max``), how long an idle member stays loaded
(``--sleep-idle-seconds`` in the member's preset), the members loaded at
start (the preset key ``load-on-startup``).

What llama-server b11434's router does, read from its ``server-models.cpp``
and checked against the binary by ``tests/groups``:

- it counts a member as loaded while its child process runs, sleeping or not,
  and evicts the least recently used idle member when a request needs a slot;
  it pins nothing, so a ``resident`` member is one loaded at start that never
  sleeps, but the LRU may still unload it when ``max_loaded`` members are
  busier than it;
- it refuses to start when more members ask for ``load-on-startup`` than
  ``--models-max`` allows;
- it has no "default member": nothing brings a member back once it was
  unloaded. ``default`` is therefore preloaded only (loaded at start, like a
  resident member that may sleep); it is not reloaded after the others go
  idle. inferfleet does not run a supervisor of its own to fake it.

One group is one deploy unit named after the group: one port, one process,
one marker; its members stay services of the fleet for the checks (windows,
templates, drafters are judged per member) and for clients (each keeps its
alias as its model id).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from inferfleet.fleetfile.base import MAX_COUNT, Loc, Name, Ref, Strict, known
from inferfleet.fleetfile.quantities import Duration
from inferfleet.fleetfile.rpc import worker_of, worker_service, worker_unit

if TYPE_CHECKING:
    from inferfleet.fleetfile.fleet import Fleet
    from inferfleet.fleetfile.service import Service

# The router runtime: only llama-server has a router mode (b11434 --models-preset).
ROUTER_KIND = "llama.cpp"


class Group(Strict):
    max_loaded: int = Field(1, ge=0, le=MAX_COUNT)
    """Members loaded at once (llama-server --models-max; 0 = no limit). The router unloads the
    least recently used idle member to make room."""
    idle_unload: Duration | None = None
    """Unload a member idle this long (its --sleep-idle-seconds); resident members never sleep.
    Default: members stay loaded until evicted."""
    resident: list[Name] = Field(default_factory=list)
    """Members loaded at start that never sleep on idle (the router's LRU may still evict them when
    max_loaded busier members need room)."""
    default: Name | None = None
    """The member loaded at start. llama-server's router cannot bring it back after it was unloaded:
    it is preloaded only."""

    @model_validator(mode="after")
    def _startup_fits(self) -> Group:
        at_start = set(self.resident) | ({self.default} if self.default else set())
        if self.max_loaded and len(at_start) > self.max_loaded:
            raise ValueError(
                f"{len(at_start)} members load at start (resident and default) but max_loaded "
                f"is {self.max_loaded}: the router refuses to start; raise max_loaded or "
                "list fewer resident members"
            )
        if self.idle_unload is not None and self.idle_unload < 1:
            raise ValueError("idle_unload must be at least 1s (the router counts whole seconds)")
        return self

    @property
    def at_start(self) -> list[str]:
        """Members the router loads when it starts (``load-on-startup``), in a stable order."""
        names = list(self.resident)
        if self.default is not None and self.default not in names:
            names.append(self.default)
        return names


def members(fleet: Fleet, group: str) -> dict[str, Service]:
    """The services of ``group``, in fleet-file order."""
    return {n: s for n, s in fleet.services.items() if s.group == group}


def group_of(fleet: Fleet, name: str) -> str | None:
    service = fleet.services.get(name)
    return None if service is None else service.group


def deploy_units(fleet: Fleet) -> list[str]:
    """What gets a unit of its own: every service outside a group, each group once, and
    each RPC worker (:mod:`inferfleet.fleetfile.rpc`), listed before its service: they
    start first and stop last."""
    units: list[str] = []
    for name, service in fleet.services.items():
        units += [worker_unit(name, worker.host) for worker in service.rpc]
        unit = service.group or name
        if unit not in units:
            units.append(unit)
    return units


def is_unit(fleet: Fleet, name: str) -> bool:
    return (
        name in fleet.groups
        or (name in fleet.services and fleet.services[name].group is None)
        or worker_of(fleet, name) is not None
    )


def unit_service(fleet: Fleet, name: str) -> Service:
    """The service a unit runs as: the service itself, or the group's router.

    A group's router is described as a service so deploy, health and status
    treat it like any other: its first member's host, runtime, address, port,
    backend, unit and health settings (the members agree on those, see
    :func:`group_errors`), its default member's model, alias and client facts
    (what the contract probe after the health gate asks the router for).
    """
    if name not in fleet.groups:
        if name not in fleet.services:
            return worker_service(fleet, name)  # KeyError when it is no unit either
        return fleet.services[name]
    group = fleet.groups[name]
    found = members(fleet, name)
    if not found:
        raise KeyError(name)
    first_name, first = next(iter(found.items()))
    lead_name = group.default if group.default in found else first_name
    lead = found[lead_name]
    return first.model_copy(
        update={
            "group": None,
            "model": lead.model,
            # The contract probe after the gate asks the router for this member.
            "alias": lead.model_id(lead_name),
            "client": lead.client,
            "ctx_per_slot": lead.ctx_per_slot,
            "parallel": lead.parallel,
            "speculative": None,
            "mmproj": None,
            "chat_template_file": None,
            "chat_template_kwargs": {},
            "extra_args": [],
            # The router has no /metrics of its own (400 without ?model=); members are
            # scraped through it one by one (render/prometheus.py).
            "metrics": False,
            "tensor_overrides": [],
            "settings": [],
            "paths": sorted({p for s in found.values() for p in s.paths}),
        }
    )


# The settings every member shares with its group's one process.
_SHARED = ("host", "bind", "port", "backend", "runtime")


def group_errors(fleet: Fleet) -> list[Ref]:
    """A group is one llama-server: one host, one llama.cpp runtime, one address and port."""
    errors: list[Ref] = []
    for name, service in fleet.services.items():
        if service.group is not None and service.group not in fleet.groups:
            errors.append(
                (
                    ("services", name, "group"),
                    f"service {name!r} joins group {service.group!r}, which is not in groups",
                    known("groups", fleet.groups) + "; add it under groups:",
                )
            )
        if service.group is not None and service.group in fleet.services:
            errors.append(
                (
                    ("services", name, "group"),
                    f"group {service.group!r} has the name of a service",
                    "a group is deployed as a unit named after it: rename the group or the service",
                )
            )
    for group_name, group in fleet.groups.items():
        errors += _one_group(fleet, group_name, group)
    return errors


def _one_group(fleet: Fleet, group_name: str, group: Group) -> list[Ref]:
    errors: list[Ref] = []
    base: Loc = ("groups", group_name)
    found = members(fleet, group_name)
    if not found:
        return [(base, f"group {group_name!r} has no members", "give services `group: NAME`")]
    for field, listed in (("resident", group.resident), ("default", [group.default])):
        for member in listed:
            if member is not None and member not in found:
                errors.append(
                    (
                        (*base, field),
                        f"{field} member {member!r} of group {group_name!r} is not a service "
                        "of the group",
                        f"members: {', '.join(found)}",
                    )
                )
    first_name, first = next(iter(found.items()))
    for name, service in found.items():
        if service.kind != "llm":
            errors.append(
                (
                    ("services", name, "kind"),
                    f"service {name!r} in group {group_name!r} is a container",
                    "only llm services served by llama.cpp can share a router",
                )
            )
            continue
        runtime = fleet.runtimes.get(service.runtime or "")
        if runtime is not None and runtime.kind != ROUTER_KIND:
            errors.append(
                (
                    ("services", name, "runtime"),
                    f"service {name!r} in group {group_name!r} runs on {runtime.kind} "
                    f"(runtime {service.runtime!r}); a swap group is one llama-server in "
                    "router mode",
                    "serve every member with the same llama.cpp runtime, or take the service "
                    "out of the group",
                )
            )
        for field in _SHARED:
            mine, theirs = getattr(service, field), getattr(first, field)
            if mine != theirs:
                errors.append(
                    (
                        ("services", name, field),
                        f"service {name!r} in group {group_name!r} has {field} {mine!r} but "
                        f"member {first_name!r} has {theirs!r}",
                        f"a group is one process on one host: give every member the same "
                        f"{field}" + (" (a group spans one host)" if field == "host" else ""),
                    )
                )
    return errors
