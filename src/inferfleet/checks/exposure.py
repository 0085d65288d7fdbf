"""Exposure rules (L-58): every socket beyond loopback is behind auth or stated open.

The policy itself lives in :mod:`inferfleet.render.exposure`, which the
launch resolver also asks, so ``up``, ``apply`` and ``render`` refuse what the
first three rules report. The last two judge the front door as declared
(``gateway:``, ``proxy:``) and an exposure that opens nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, rule
from inferfleet.render import service_keys as keys
from inferfleet.render.exposure import (
    Listener,
    ProblemKind,
    gateway_services,
    is_loopback,
    listeners,
    problems,
    rpc_problems,
)


def _problems(ctx: CheckContext, kind: ProblemKind) -> Iterator[Hit]:
    for listener in listeners(ctx.fleet):
        for found in problems(ctx.fleet, listener):
            if found.kind == kind:
                yield Hit(found.service, found.field, found.message, found.hint)


@rule("bind-beyond-exposure", "L-58", "error")
def bind_beyond_exposure(ctx: CheckContext) -> Iterator[Hit]:
    """a server listens beyond loopback without an exposure that allows it"""
    yield from _problems(ctx, "bind")


@rule("rpc-worker-bind", "L-58", "error")
def rpc_worker_bind(ctx: CheckContext) -> Iterator[Hit]:
    """an RPC worker listens beyond the fleet's private network (it has no authentication)"""
    for found in rpc_problems(ctx.fleet):
        yield Hit(found.service, found.field, found.message, found.hint)


@rule("router-beyond-gateway", "L-58", "error")
def router_beyond_gateway(ctx: CheckContext) -> Iterator[Hit]:
    """a swap group's router (management routes, Hub downloads) is reachable past the gateway"""
    yield from _problems(ctx, "router")


@rule("lan-exposure-without-reason", "L-58", "error")
def lan_without_reason(ctx: CheckContext) -> Iterator[Hit]:
    """a lan exposure states no reason: nobody can tell an open port from a forgotten one"""
    yield from _problems(ctx, "reason")


@rule("public-without-auth-proxy", "L-58", "error")
def public_without_proxy(ctx: CheckContext) -> Iterator[Hit]:
    """a public service or gateway has no auth proxy in front of it"""
    yield from _problems(ctx, "proxy")


def _fronted(ctx: CheckContext) -> Iterator[tuple[str, str, str, Listener]]:
    """(front, its host, field naming the route, listener it routes to) for every route."""
    fleet = ctx.fleet
    by_name = {item.where: item for item in listeners(fleet)}
    if fleet.gateway is not None:
        for name in gateway_services(fleet):
            yield "gateway", fleet.gateway.host, "gateway.services", by_name[f"services.{name}"]
    if fleet.proxy is not None:
        if fleet.gateway is not None:
            yield "proxy", fleet.proxy.host, "proxy.host", by_name["gateway"]
        for index, name in enumerate(fleet.proxy.services):
            target = by_name[f"services.{name}"]
            yield "proxy", fleet.proxy.host, f"proxy.services[{index}]", target


@rule("front-cannot-reach", "L-58", "error")
def front_cannot_reach(ctx: CheckContext) -> Iterator[Hit]:
    """the gateway or proxy routes to a listener on another host that binds loopback"""
    for front, host, field, target in _fronted(ctx):
        if target.host == host or not is_loopback(target.bind):
            continue
        yield Hit(
            target.service,
            field,
            f"the {front} on host {host!r} routes to {target.what} on host {target.host!r}, "
            f"which binds {target.bind}: only its own host reaches it",
            f"run the {front} on {target.host!r}, or bind {target.what} to its LAN address "
            'with exposure: {level: lan, reason: "the ' + front + " on " + host + ' reaches it"}',
        )


@rule("lan-exposure-loopback-bind", "L-58", "warning")
def lan_loopback_bind(ctx: CheckContext) -> Iterator[Hit]:
    """a lan exposure binds a loopback address: nothing on the LAN reaches it"""
    for listener in listeners(ctx.fleet):
        if listener.exposure.level == "lan" and is_loopback(listener.bind):
            yield Hit(
                listener.service,
                f"{listener.where}.exposure",
                f"{listener.what} is exposed to the LAN but binds {listener.bind}, a loopback "
                "address: nothing on the LAN reaches it",
                "bind the host's LAN address (or 0.0.0.0), or drop the exposure to keep it "
                "on loopback",
            )


@rule("key-beyond-loopback", "L-58", "error")
def key_beyond_loopback(ctx: CheckContext) -> Iterator[Hit]:
    """a server reachable beyond loopback requires no API key (from its secrets_env)"""
    fleet = ctx.fleet
    for name, service in fleet.services.items():
        if not keys.keyed(fleet, name):
            continue
        variable = keys.key_variable(fleet, name)
        where = f"services.{name}"
        if variable is None:
            kind = fleet.runtimes[service.runtime or ""].kind
            yield Hit(
                name,
                f"{where}.bind",
                f"service {name!r} binds {service.bind}, beyond loopback, but {kind} reads its "
                "API key from argv only (visible to every user of the host, L-06): anyone "
                "who reaches the port uses it",
                "bind 127.0.0.1 and reach it through the gateway or the auth proxy on its host",
            )
        elif service.secrets_env is None:
            yield Hit(
                name,
                f"{where}.bind",
                f"service {name!r} binds {service.bind}, beyond loopback, with no API key: "
                "anyone who reaches the port uses it",
                f"give it secrets_env: an untracked mode-600 file on its host with "
                f"{variable}=<a long random key> (the server reads it; inferfleet, the gateway "
                f"and the proxy send it from {keys.front_variable(name)}, see "
                "docs/closed-by-default.md); or bind 127.0.0.1",
            )
