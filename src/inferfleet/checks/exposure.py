"""Exposure rules (L-58): every socket beyond loopback is behind auth or stated open.

The policy itself lives in :mod:`inferfleet.render.exposure`, which the
launch resolver also asks, so ``up``, ``apply`` and ``render`` refuse what the
first three rules report. The last three judge the routes of the front door as
declared (``gateway:``, ``proxy:``) and of the fleet's Prometheus
(``monitoring.prometheus``: a bridged container reaches its host only at the
host gateway name, L-57), and an exposure that opens nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from inferfleet.checks.engine import CheckContext, Hit, RuleFn, rule
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.render import service_keys as keys
from inferfleet.render.endpoints import HOST_GATEWAY, host_port
from inferfleet.render.exposure import (
    Listener,
    Problem,
    ProblemKind,
    gateway_services,
    is_loopback,
    listeners,
    problems,
    rpc_problems,
)

# What the exposure policy refuses, one rule per kind of problem (the resolver refuses
# the same at launch): kind, rule id, title.
_POLICY: tuple[tuple[ProblemKind, str, str], ...] = (
    (
        "bind",
        "bind-beyond-exposure",
        "a server listens beyond loopback without an exposure that allows it",
    ),
    (
        "rpc",
        "rpc-worker-bind",
        "an RPC worker listens beyond the fleet's private network (it has no authentication)",
    ),
    (
        "router",
        "router-beyond-gateway",
        "a swap group's router (management routes, Hub downloads) is reachable past the gateway",
    ),
    (
        "reason",
        "lan-exposure-without-reason",
        "a lan exposure states no reason: nobody can tell an open port from a forgotten one",
    ),
    (
        "proxy",
        "public-without-auth-proxy",
        "a public service or gateway has no auth proxy in front of it",
    ),
)


def _policy_rule(kind: ProblemKind) -> RuleFn:
    def refused(ctx: CheckContext) -> Iterator[Hit]:
        for problem in ctx.once("exposure-problems", lambda: _problems(ctx.fleet)):
            if problem.kind == kind:
                yield Hit(problem.service, problem.field, problem.message, problem.hint)

    return refused


def _problems(fleet: Fleet) -> list[Problem]:
    """Everything the exposure policy refuses in the fleet (every listener, the RPC split)."""
    return [p for item in listeners(fleet) for p in problems(fleet, item)] + rpc_problems(fleet)


for _kind, _rule_id, _title in _POLICY:
    rule(_rule_id, "L-58", "error", title=_title)(_policy_rule(_kind))


@dataclass(frozen=True)
class _Route:
    front: str  # for messages: "the gateway", "the proxy", "Prometheus"
    host: str  # where the front runs
    field: str  # the fleet field naming the route
    target: Listener
    verb: str = "routes to"
    bridged: bool = False  # the front runs in a container on a bridged network


def _fronted(ctx: CheckContext) -> Iterator[_Route]:
    """Every route from a front (gateway, proxy, the fleet's Prometheus) to a listener."""
    fleet = ctx.fleet
    by_name = {item.where: item for item in listeners(fleet)}
    if fleet.gateway is not None:
        for name in gateway_services(fleet):
            yield _Route(
                "the gateway", fleet.gateway.host, "gateway.services", by_name[f"services.{name}"]
            )
    if fleet.proxy is not None:
        if fleet.gateway is not None:
            yield _Route("the proxy", fleet.proxy.host, "proxy.host", by_name["gateway"])
        for index, name in enumerate(fleet.proxy.services):
            target = by_name[f"services.{name}"]
            yield _Route("the proxy", fleet.proxy.host, f"proxy.services[{index}]", target)
    site = fleet.monitoring.prometheus if fleet.monitoring is not None else None
    if site is not None:
        for name, service in fleet.services.items():
            if service.metrics_on:
                target = by_name[f"services.{name}"]
                bridged = site.network == "container"
                field = "monitoring.prometheus.host"
                yield _Route("Prometheus", site.host, field, target, "scrapes", bridged)


@rule("front-cannot-reach", "L-58", "error")
def front_cannot_reach(ctx: CheckContext) -> Iterator[Hit]:
    """a front door or Prometheus reaches a loopback listener on another host"""
    for route in _fronted(ctx):
        target, front, host = route.target, route.front, route.host
        if target.host == host or not is_loopback(target.bind):
            continue
        yield Hit(
            target.service,
            route.field,
            f"{front} on host {host!r} {route.verb} {target.what} on host {target.host!r}, "
            f"which binds {target.bind}: only its own host reaches it",
            f"run {front} on {target.host!r}, or bind {target.what} to its LAN address "
            'with exposure: {level: lan, reason: "' + front + " on " + host + ' reaches it"}',
        )


@rule("container-cannot-reach-loopback", "L-57", "error")
def container_cannot_reach_loopback(ctx: CheckContext) -> Iterator[Hit]:
    """a front in a bridged container reaches a listener on its own host that binds loopback"""
    for route in _fronted(ctx):
        target, front, host = route.target, route.front, route.host
        if not route.bridged or target.host != host or not is_loopback(target.bind):
            continue
        yield Hit(
            target.service,
            route.field,
            f"{front} runs in a bridged container on host {host!r} and {route.verb} "
            f"{target.what}, which binds {target.bind}: inside the container that address "
            f"is the container's own, and the host is reached only at {HOST_GATEWAY}",
            f'bind {target.what} to 0.0.0.0 with exposure: {{level: lan, reason: "{front} '
            f'in a container on {host} reaches it"}} (the rendered address is '
            f"{host_port(HOST_GATEWAY, target.port)}), or run {front} on the host's "
            "network (network: host)",
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
