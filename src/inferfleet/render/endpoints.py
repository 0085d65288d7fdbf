"""Where clients and Prometheus reach a service, and what it promises them.

One definition for every artifact that points at an endpoint (scrape
targets, client configs, the dashboard), so they cannot disagree.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from inferfleet.fleetfile.fleet import Fleet, Service
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


def endpoint(fleet: Fleet, name: str) -> Endpoint:
    service = fleet.services[name]
    kind = None if service.runtime is None else fleet.runtimes[service.runtime].kind
    return Endpoint(
        service=name,
        host=service.host,
        address=f"{reachable_address(fleet, service)}:{service.port}",
        runtime=kind,
        alias=service.alias or name,
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
