"""RPC workers: one llama.cpp model split across hosts.

A llama.cpp service lists ``rpc`` workers: a device of another host of the
fleet, served to the service's llama-server by ``ggml-rpc-server`` (llama.cpp
b11434 ``tools/rpc``) on a port of that host. The service's server then runs
with ``--rpc ADDRESS:PORT,...`` and puts part of the model's layers there.

Each worker is a deploy unit of its own on its host, named after the service
and the worker's host (:func:`worker_unit`), so the same launch pipeline,
backends, markers and status treat it like any other unit; its gate is its
port being open (it speaks its own protocol, not HTTP).

``ggml-rpc-server`` has no authentication at all ("never expose the RPC
server to an open network"): its address is a private address of the fleet's
network, judged by :mod:`inferfleet.render.exposure` (L-58).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from inferfleet.fleetfile.base import Loc, Name, Ref, Strict, absent
from inferfleet.fleetfile.exposure import TCP_HEALTH, Bind

if TYPE_CHECKING:
    from inferfleet.fleetfile.fleet import Fleet
    from inferfleet.fleetfile.service import Service

RPC_KIND = "llama.cpp"
UNIT_MARK = ".rpc."  # in a unit name: SERVICE.rpc.HOST


class RpcWorker(Strict):
    host: Name
    """A host of the fleet other than the service's own."""
    device: Name
    """The device of that host the worker serves."""
    port: int = Field(ge=1, le=65535)
    """The worker's port on its host."""
    bind: Bind | None = None
    """Private address the worker listens on; default: its host's address. ggml-rpc-server has no
    authentication: never beyond the fleet's network (L-58)."""


def worker_unit(service: str, host: str) -> str:
    """The deploy unit of ``service``'s worker on ``host``."""
    return f"{service}{UNIT_MARK}{host}"


def worker_units(fleet: Fleet) -> dict[str, tuple[str, int]]:
    """Every worker unit of the fleet -> (its service, its index in ``rpc``)."""
    return {
        worker_unit(name, worker.host): (name, index)
        for name, service in fleet.services.items()
        for index, worker in enumerate(service.rpc)
    }


def worker_of(fleet: Fleet, unit: str) -> tuple[str, RpcWorker] | None:
    """(service, worker) of a worker unit, or None when ``unit`` is not one."""
    found = worker_units(fleet).get(unit)
    if found is None:
        return None
    return found[0], fleet.services[found[0]].rpc[found[1]]


def worker_hosts_first(fleet: Fleet, hosts: list[str]) -> tuple[list[str], list[str]]:
    """``hosts`` in two waves: those running an RPC worker, then the others.

    A deploy applies the first wave before the second, so a split server
    starts once its workers answer (and its host's apply refuses to start it
    while one does not, naming the worker).
    """
    workers = {worker.host for service in fleet.services.values() for worker in service.rpc}
    return [h for h in hosts if h in workers], [h for h in hosts if h not in workers]


def worker_address(fleet: Fleet, worker: RpcWorker) -> str:
    """Where the worker listens and where the service's server reaches it."""
    if worker.bind is not None:
        return worker.bind
    host = fleet.hosts[worker.host]
    return host.address or worker.host


def worker_service(fleet: Fleet, unit: str) -> Service:
    """The service a worker unit runs as: on the worker's host and port, no model of its own.

    Like a swap group's router (:func:`inferfleet.fleetfile.groups.unit_service`),
    so deploy and status take it like any other unit; its backend, unit settings
    and runtime are the service's.
    """
    found = worker_of(fleet, unit)
    if found is None:
        raise KeyError(unit)
    name, worker = found
    service = fleet.services[name]
    health = type(service.health).model_construct(path=TCP_HEALTH, timeout=service.health.timeout)
    return service.model_copy(
        update={
            "host": worker.host,
            "port": worker.port,
            "bind": worker_address(fleet, worker),
            "devices": [worker.device],
            "rpc": [],
            "alias": f"rpc worker of {name}",  # what its unit's description says it serves
            "group": None,
            "metrics": False,
            "speculative": None,
            "mmproj": None,
            "chat_template_file": None,
            "extra_args": [],
            "tensor_split": [],
            "tensor_overrides": [],
            "settings": [],
            "secrets_env": None,
            "health": health,
        }
    )


def rpc_errors(fleet: Fleet) -> list[Ref]:
    """Workers name other hosts of the fleet, their devices, and one llama.cpp build."""
    errors: list[Ref] = []
    for name, service in fleet.services.items():
        if service.rpc:
            errors += _service_workers(fleet, name, service)
    return errors


def _service_workers(fleet: Fleet, name: str, service: Service) -> list[Ref]:
    errors: list[Ref] = []
    base: Loc = ("services", name, "rpc")
    runtime = fleet.runtimes.get(service.runtime or "")
    if service.kind != "llm" or runtime is None or runtime.kind != RPC_KIND:
        errors.append(
            (
                base,
                f"service {name!r} lists rpc workers but is not served by llama.cpp",
                "only llama-server splits a model over RPC workers; drop rpc:",
            )
        )
    elif runtime.source is None:
        errors.append(
            (
                base,
                f"service {name!r} lists rpc workers but runtime {service.runtime!r} is not "
                "built from a pinned source",
                "workers and server must run the same llama.cpp build (the RPC protocol "
                "version must match): pin the runtime with source: (package, version)",
            )
        )
    if service.group is not None:
        errors.append(
            (
                base,
                f"service {name!r} is in swap group {service.group!r} and lists rpc workers",
                "a group's router starts its members itself; split a model over RPC outside "
                "a group",
            )
        )
    seen: set[str] = set()
    for index, worker in enumerate(service.rpc):
        unit = worker_unit(name, worker.host)
        if unit in fleet.services or unit in fleet.groups:
            errors.append(
                (
                    (*base, index),
                    f"rpc worker {index} of service {name!r} is deployed as unit {unit!r}, "
                    "the name of a service or group",
                    "rename that service or group",
                )
            )
        where: Loc = (*base, index)
        host = fleet.hosts.get(worker.host)
        if host is None:
            said = f"rpc worker {index} of service {name!r} is on host {worker.host!r}"
            errors.append(absent((*where, "host"), said, "hosts", fleet.hosts))
            continue
        if worker.host == service.host:
            errors.append(
                (
                    (*where, "host"),
                    f"rpc worker {index} of service {name!r} is on the service's own host "
                    f"{worker.host!r}",
                    "list the host's devices in the service's devices instead",
                )
            )
        if worker.host in seen:
            errors.append(
                (
                    (*where, "host"),
                    f"service {name!r} has two rpc workers on host {worker.host!r}",
                    "one worker per host serves that host's device (one unit per host)",
                )
            )
        seen.add(worker.host)
        if worker.device not in {d.name for d in host.devices}:
            errors.append(
                (
                    (*where, "device"),
                    f"rpc worker {index} of service {name!r} names device {worker.device!r}, "
                    f"which host {worker.host!r} does not have",
                    f"devices of {worker.host}: "
                    f"{', '.join(d.name for d in host.devices) or '(none declared)'}",
                )
            )
    return errors
