"""Where clients and Prometheus reach a service, and what it promises them.

One definition for every artifact that points at an endpoint (scrape
targets, client configs, the dashboard), so they cannot disagree.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final

from inferfleet.fleetfile.fleet import Fleet, Service
from inferfleet.render.exposure import gateway_services
from inferfleet.runtimes.registry import traits


@dataclass(frozen=True)
class Endpoint:
    service: str
    host: str
    address: str  # host:port as reachable from the fleet
    runtime: str | None  # runtime kind, None for an ordinary container
    alias: str
    ctx_per_slot: int | None
    parallel: int

    @property
    def base_url(self) -> str:
        return f"http://{self.address}/v1"


def reachable_address(fleet: Fleet, service: Service) -> str:
    """The bind address, or the host's address when the server listens on all of them."""
    bind = ipaddress.ip_address(service.bind)
    if bind.is_unspecified:
        host = fleet.hosts[service.host]
        return host.address or service.host
    return service.bind if bind.version == 4 else f"[{service.bind}]"


# The name podman writes into every bridged container's /etc/hosts for its host (L-57): a
# container on a bridged network reaches a service on its own host only there, not at the
# host's loopback (the container's own) nor at its LAN address (not forwarded into the
# container network; only published ports are DNATed). The one place this name is written.
HOST_GATEWAY: Final = "host.containers.internal"


def host_port(address: str, port: int) -> str:
    """``address:port``, an IPv6 address in brackets."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def dial_address(
    fleet: Fleet,
    host: str,
    bind: str,
    port: int,
    *,
    from_host: str | None,
    bridged: bool = False,
) -> str:
    """``host:port`` at which a consumer on ``from_host`` reaches a listener on ``host``
    bound to ``bind``: the gateway's backends, the proxy's upstreams, Prometheus' targets.

    - From a bridged container on the listener's own host: the host gateway name
      (L-57); a loopback bind is unreachable from there, which ``check`` reports
      (``container-cannot-reach-loopback``).
    - From the listener's own host (a process, or a container on the host's
      network): loopback for a wildcard bind, else the bind.
    - From another host, or ``from_host`` None (as the fleet reaches it): the
      host's address for a wildcard bind, else the bind.
    """
    if from_host == host and bridged:
        return host_port(HOST_GATEWAY, port)
    if ipaddress.ip_address(bind).is_unspecified:
        if from_host == host:
            bind = "::1" if ipaddress.ip_address(bind).version == 6 else "127.0.0.1"
        else:
            bind = fleet.hosts[host].address or host
    return host_port(bind, port)


def judged_on_host(fleet: Fleet, service: Service) -> bool:
    """Whether only the service's host can tell its health: a loopback bind on another
    machine (here that address is this machine's), or a host whose fleet entry says so.

    Asking from here would be answered by whatever listens on this machine's
    loopback: a stranger's 200 is never this service's health (L-33).
    """
    host = fleet.hosts[service.host]
    if host.is_local(service.host):
        return False
    return host.health_from == "host" or ipaddress.ip_address(service.bind).is_loopback


def endpoint(fleet: Fleet, name: str) -> Endpoint:
    service = fleet.services[name]
    kind = None if service.runtime is None else fleet.runtimes[service.runtime].kind
    return Endpoint(
        service=name,
        host=service.host,
        address=f"{reachable_address(fleet, service)}:{service.port}",
        runtime=kind,
        alias=service.model_id(name),
        ctx_per_slot=service.ctx_per_slot,
        parallel=service.parallel,
    )


def llm_services(fleet: Fleet) -> list[str]:
    return [name for name, svc in fleet.services.items() if svc.kind == "llm"]


def reasoning_field(fleet: Fleet, service: Service) -> str | None:
    """Where this endpoint puts reasoning text (L-45): the fleet's word, else the runtime's."""
    if service.client.reasoning_field is not None:
        return service.client.reasoning_field
    if service.runtime is None:
        return None
    return traits(fleet.runtimes[service.runtime].kind).reasoning_field


def compaction_threshold(service: Service) -> int:
    """Prompt size at which a client compacts, so max_tokens still fits the slot (L-26)."""
    window = service.ctx_per_slot or 0
    if service.client.compaction_threshold is not None:
        return service.client.compaction_threshold
    return max(window - service.client.max_tokens, 0)


def gateway_url(fleet: Fleet) -> str | None:
    """The gateway's base URL (``.../v1``) as clients reach it, or None without a gateway."""
    gateway = fleet.gateway
    if gateway is None:
        return None
    address = gateway.bind
    if ipaddress.ip_address(address).is_unspecified:
        host = fleet.hosts.get(gateway.host)
        address = (host.address if host is not None else None) or gateway.host
    if ":" in address:
        address = f"[{address}]"
    return f"http://{address}:{gateway.port}/v1"


def proxy_url(fleet: Fleet) -> str | None:
    """The auth proxy's address as clients use it (``https://NAME[:PORT]``), or None."""
    proxy = fleet.proxy
    if proxy is None:
        return None
    address = proxy.names[0] if proxy.names else proxy.bind
    if not proxy.names and ipaddress.ip_address(address).is_unspecified:
        host = fleet.hosts.get(proxy.host)
        address = (host.address if host is not None else None) or proxy.host
    if ":" in address:
        address = f"[{address}]"
    return f"https://{address}" + ("" if proxy.port == 443 else f":{proxy.port}")


def via_proxy(fleet: Fleet, name: str) -> bool:
    """Whether clients reach ``name`` through the auth proxy: it routes the service itself
    (``proxy.services``) or the gateway in front of it."""
    proxy = fleet.proxy
    if proxy is None:
        return False
    return name in proxy.services or (fleet.gateway is not None and name in gateway_services(fleet))


def client_base_url(fleet: Fleet, name: str) -> str:
    """Where a client sends requests for service ``name``: the auth proxy when it routes
    the service (the address a laptop can reach, with TLS and a key), else the gateway when
    it fronts the service (one URL, one key for every model), else the service itself."""
    front = proxy_url(fleet)
    if front is not None and fleet.proxy is not None and via_proxy(fleet, name):
        # The proxy routes a listed service under /<service>/ and everything else to the
        # gateway, whose /v1 it passes unchanged (render/caddy.py).
        return f"{front}/{name}/v1" if name in fleet.proxy.services else f"{front}/v1"
    url = gateway_url(fleet)
    if url is not None and name in gateway_services(fleet):
        return url
    return endpoint(fleet, name).base_url
