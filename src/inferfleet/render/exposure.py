"""Where a service listens, and whether its exposure allows it (L-58): the one decision.

Every socket the fleet opens on a host is judged here, before anything is
rendered: the service's ``bind`` (the ``--host`` of every runtime adapter,
the published port of a container), the gateway's and the proxy's, and any
listener address a service's ``extra_args`` set where the server shares the
host's network (``--data-parallel-address``, ``--dist-init-addr``: RPC-like
ports). Metrics are served on the service's own port, so they follow its
exposure with it.

- ``loopback`` allows loopback addresses only (127.0.0.0/8, ::1);
- ``lan`` allows any address, with a stated reason;
- ``public`` allows any address when the auth proxy is in front of it: the
  service is in ``proxy.services``, or the gateway fronts it (the gateway is
  behind the proxy whenever both are declared).

:func:`listen_address` is what the launch resolver asks (so ``up``,
``apply``, ``show`` and ``render`` refuse what ``check`` reports, whether or
not ``check`` ran); the ``check`` rules of :mod:`inferfleet.checks.exposure`
report the same :class:`Problem` list with the rule that names each kind.
Pure: the fleet in, data out.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Literal

from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Exposure, Fleet
from inferfleet.fleetfile.rpc import RpcWorker, worker_address, worker_of
from inferfleet.runtimes.flags import parse_args

# Flags that make a server listen on an address of their own (vLLM's
# --data-parallel-address, SGLang's --dist-init-addr, a --metrics-host ...).
_LISTEN_FLAG = re.compile(r"^--?(?:[a-z0-9]+[-_])*(?:host|address|addr|bind|listen)$", re.I)
_WITH_PORT = re.compile(r"^\[(?P<v6>[^\]]+)\](?::\d+)?$|^(?P<v4>[0-9.]+):\d+$")

ProblemKind = Literal["bind", "reason", "proxy", "rpc", "router"]


class ExposureError(UsageError):
    """A service would listen where its exposure does not allow (L-58)."""


@dataclass(frozen=True)
class Problem:
    kind: ProblemKind  # bind: beyond its exposure; reason: lan without one; proxy: public unproxied
    field: str  # dotted path in the fleet file
    service: str | None
    message: str
    hint: str


@dataclass(frozen=True)
class Listener:
    """One thing of the fleet that listens on a host: a service, the gateway or the proxy."""

    where: str  # dotted field prefix: services.chat | gateway | proxy
    what: str  # for messages: "service 'chat'", "the gateway"
    service: str | None
    host: str
    bind: str
    port: int
    exposure: Exposure
    flags: tuple[tuple[str, str], ...] = ()  # (flag, address) from extra_args, on the host's net


def is_loopback(address: str) -> bool:
    """Whether ``address`` (an IP, or ``localhost``) only reaches this host."""
    if address.lower() == "localhost":
        return True
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False  # a name: it resolves to whatever the network says
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return parsed.is_loopback


def flag_addresses(fleet: Fleet, name: str) -> tuple[tuple[str, str], ...]:
    """Listener addresses service ``name``'s ``extra_args`` set on the host's network.

    A container on bridge networking listens inside its own namespace: only
    its published port (the bind) reaches the host's networks.
    """
    service = fleet.services[name]
    runtime = fleet.runtimes.get(service.runtime or "")
    in_container = service.kind == "container" or (
        runtime is not None and runtime.image is not None
    )
    if in_container and service.container.network == "bridge":
        return ()
    found: list[tuple[str, str]] = []
    for arg in parse_args(service.extra_args):
        if arg.flag is None or arg.value is None or not _LISTEN_FLAG.match(arg.flag):
            continue
        match = _WITH_PORT.match(arg.value)
        address = arg.value if match is None else match.group("v6") or match.group("v4")
        found.append((arg.flag, address))
    return tuple(found)


def service_listener(fleet: Fleet, name: str) -> Listener:
    service = fleet.services[name]
    return Listener(
        f"services.{name}",
        f"service {name!r}",
        name,
        service.host,
        service.bind,
        service.port,
        service.exposure,
        flag_addresses(fleet, name),
    )


def listeners(fleet: Fleet) -> list[Listener]:
    """Every listener of the fleet: its services in order, then the gateway and the proxy."""
    found = [service_listener(fleet, name) for name in fleet.services]
    for section in ("gateway", "proxy"):
        front = fleet.gateway if section == "gateway" else fleet.proxy
        if front is not None:
            found.append(
                Listener(
                    section,
                    f"the {section}",
                    None,
                    front.host,
                    front.bind,
                    front.port,
                    front.exposure,
                )
            )
    return found


def gateway_services(fleet: Fleet) -> list[str]:
    """The services the gateway fronts (default: every llm service); none without a gateway."""
    if fleet.gateway is None:
        return []
    if fleet.gateway.services is not None:
        return list(fleet.gateway.services)
    return [name for name, s in fleet.services.items() if s.kind == "llm"]


def behind_proxy(fleet: Fleet, listener: Listener) -> bool:
    """Whether the auth proxy is in front of ``listener`` (the proxy is its own auth)."""
    if listener.where == "proxy":
        return True
    if fleet.proxy is None:
        return False
    if listener.where == "gateway":
        return True
    return listener.service in fleet.proxy.services or listener.service in gateway_services(fleet)


def problems(fleet: Fleet, listener: Listener) -> list[Problem]:
    """Everything the exposure policy refuses about one listener, in field order."""
    found: list[Problem] = []
    level = listener.exposure.level
    what, where = listener.what, listener.where
    open_hint = (
        "keep it on loopback (the gateway or proxy on this host reaches it there), or open it "
        'on purpose: exposure: {level: lan, reason: "who reaches it and why"}, or '
        "exposure: public behind the auth proxy"
    )
    if level == "loopback" and not is_loopback(listener.bind):
        found.append(
            Problem(
                "bind",
                f"{where}.bind",
                listener.service,
                f"{what} binds {listener.bind} on host {listener.host!r}, beyond loopback, "
                "but its exposure is loopback: the network reaches it with no auth in front",
                f"bind 127.0.0.1; or {open_hint}",
            )
        )
    for flag, address in listener.flags:
        if level == "loopback" and not is_loopback(address):
            found.append(
                Problem(
                    "bind",
                    f"{where}.extra_args",
                    listener.service,
                    f"{what} listens on {address} through {flag} in extra_args, beyond "
                    "loopback, but its exposure is loopback",
                    f"give {flag} a loopback address; or {open_hint}",
                )
            )
    found += router_problems(fleet, listener)
    if level == "lan" and listener.exposure.reason is None:
        found.append(
            Problem(
                "reason",
                f"{where}.exposure",
                listener.service,
                f"{what} is exposed to the LAN (binds {listener.bind}) without a stated reason",
                'write exposure: {level: lan, reason: "who on the LAN reaches it and why"}, '
                "or keep it on loopback",
            )
        )
    if level == "public" and not behind_proxy(fleet, listener):
        if fleet.proxy is None:
            message = f"{what} is public, but the fleet declares no auth proxy (proxy:)"
        else:
            message = (
                f"{what} is public, but the auth proxy does not front it (neither in "
                "proxy.services nor behind the gateway)"
            )
        found.append(
            Problem(
                "proxy",
                f"{where}.exposure",
                listener.service,
                message,
                "declare proxy: (auth: bearer with keys_env, or forward_auth to an Authentik/"
                "Authelia outpost) and route it through proxy.services or gateway.services; "
                "or give it exposure lan with a reason",
            )
        )
    return found


def router_problems(fleet: Fleet, listener: Listener) -> list[Problem]:
    """A swap group's router is reached through the gateway only (L-58).

    llama-server's router serves management routes next to the OpenAI ones
    (``POST /models`` loads and downloads, ``POST /models/load|unload``,
    ``DELETE /models``), and b11434 has no switch that closes them. So the
    router listens on loopback, whatever its members' exposure says, and no
    auth proxy route passes its paths through: the gateway on its host, which
    forwards the OpenAI routes only, is the one way in.
    """
    service = fleet.services.get(listener.service or "")
    if service is None or service.group is None:
        return []
    what, where, group = listener.what, listener.where, service.group
    found: list[Problem] = []
    routes = (
        "(POST /models loads and downloads any Hub repo; load, unload and delete need no "
        "key in llama-server b11434)"
    )
    if not is_loopback(listener.bind):
        found.append(
            Problem(
                "router",
                f"{where}.bind",
                listener.service,
                f"{what} is a member of swap group {group!r}, whose router would listen on "
                f"{listener.bind}, beyond loopback: its management routes {routes} would be "
                "reachable there",
                "bind 127.0.0.1 and reach the group through the gateway on its host "
                "(gateway.services), which forwards the OpenAI routes only",
            )
        )
    if fleet.proxy is not None and listener.service in fleet.proxy.services:
        found.append(
            Problem(
                "router",
                "proxy.services",
                listener.service,
                f"the auth proxy routes every path under /{listener.service}/ to {what}, a "
                f"member of swap group {group!r}: its router's management routes {routes} "
                "would pass through",
                f"remove {listener.service} from proxy.services and reach it through the "
                "gateway, which forwards the OpenAI routes only",
            )
        )
    return found


def listen_address(fleet: Fleet, name: str) -> str:
    """The address service ``name`` binds on its host: its ``bind``, once its exposure allows it.

    ExposureError (what, where, how to fix) for the first problem: nothing is
    rendered or started that would listen beyond what the fleet file states.
    """
    listener = service_listener(fleet, name)
    found = problems(fleet, listener)
    if found:
        first = found[0]
        raise ExposureError(first.message + " (L-58)", where=first.field, hint=first.hint)
    return listener.bind


def worker_problems(fleet: Fleet, name: str, index: int, worker: RpcWorker) -> list[Problem]:
    """An RPC worker listens only on a private address of the fleet's network (L-58).

    ``ggml-rpc-server`` has no authentication and lets whoever connects run
    graphs on the device: no exposure level opens it, not even ``lan`` with a
    reason. It binds one private IP address (RFC 1918, IPv6 unique-local) that
    the service's host reaches: never a wildcard, a public address, a name, or
    loopback (the service runs on another host).
    """
    address = worker_address(fleet, worker)
    where = f"services.{name}.rpc.{index}.bind"
    what = f"rpc worker {index} of service {name!r} (host {worker.host!r})"
    hint = (
        "give the worker bind: a private address of its host on the fleet's network "
        "(10.x, 172.16-31.x, 192.168.x, fd00::/8), or give the host such an address"
    )
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return [
            Problem(
                "rpc",
                where,
                name,
                f"{what} would listen on {address!r}, not an IP "
                "address: a name resolves to whatever the network says",
                hint,
            )
        ]
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    if parsed.is_loopback or parsed.is_unspecified or not parsed.is_private:
        kind = (
            "loopback (the service's host cannot reach it)"
            if parsed.is_loopback
            else "every address"
            if parsed.is_unspecified
            else "a public address"
        )
        return [
            Problem(
                "rpc",
                where,
                name,
                f"{what} would listen on {address}, {kind}: ggml-rpc-server has no "
                "authentication and runs what any client sends",
                hint,
            )
        ]
    return []


def rpc_problems(fleet: Fleet) -> list[Problem]:
    """Every RPC worker bind the policy refuses, in fleet order."""
    return [
        problem
        for name, service in fleet.services.items()
        for index, worker in enumerate(service.rpc)
        if worker.host in fleet.hosts
        for problem in worker_problems(fleet, name, index, worker)
    ]


def worker_listen_address(fleet: Fleet, unit: str) -> str:
    """The address RPC worker unit ``unit`` binds, once the policy allows it (L-58)."""
    found = worker_of(fleet, unit)
    if found is None:
        raise KeyError(unit)
    name, worker = found
    problems_found = worker_problems(fleet, name, fleet.services[name].rpc.index(worker), worker)
    if problems_found:
        first = problems_found[0]
        raise ExposureError(first.message + " (L-58)", where=first.field, hint=first.hint)
    return worker_address(fleet, worker)


def publish_spec(bind: str, port: int, container_port: int) -> str:
    """``ADDRESS:PORT:CONTAINER_PORT`` for podman's --publish / Quadlet's PublishPort."""
    host = f"[{bind}]" if ipaddress.ip_address(bind).version == 6 else bind
    return f"{host}:{port}:{container_port}"
