"""What `probe` and `bench` talk to: a fleet service by name, or a bare URL.

A service brings its promises from the fleet file (alias, per-slot context,
slots, client facts) and the probe holds the server to them. A bare URL
promises nothing: the model id is read from ``/v1/models`` and checks that
need a promise say so and skip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from inferfleet.client.keys import service_key
from inferfleet.errors import ContractError, UsageError
from inferfleet.fleetfile.exposure import is_ip, url_for
from inferfleet.fleetfile.fleet import ClientFacts
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.io import http


@dataclass(frozen=True)
class Target:
    label: str  # the service name, or the URL as given
    base_url: str  # scheme://host:port, no trailing slash
    model: str | None  # the model id requests name; None until discovered for URLs
    service: str | None = None
    ctx_per_slot: int | None = None
    parallel: int | None = None
    client: ClientFacts | None = None  # None: a bare URL declares nothing
    via: str = ""  # how base_url reaches it when not directly (deploy.tunnel)
    key: str | None = field(default=None, repr=False)  # its API key, when it requires one

    @property
    def declared(self) -> bool:
        return self.client is not None


def is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def from_url(text: str) -> Target:
    parts = urlsplit(text)
    if not parts.hostname:
        raise UsageError(f"{text!r} is not a URL with a host", hint="e.g. http://127.0.0.1:8080")
    path = parts.path.rstrip("/")
    if path in {"/v1", ""}:
        path = ""
    else:
        raise UsageError(
            f"give the server's base URL, not an endpoint path ({parts.path})",
            hint=f"e.g. {parts.scheme}://{parts.netloc}",
        )
    return Target(label=text, base_url=f"{parts.scheme}://{parts.netloc}{path}", model=None)


def from_service(loaded: LoadedFleet, name: str) -> Target:
    fleet = loaded.fleet
    if name not in fleet.services:
        raise UsageError(
            f"no service named {name!r} in {loaded.path}",
            hint=f"known services: {', '.join(sorted(fleet.services)) or '(none)'}; "
            "or pass a URL such as http://127.0.0.1:8080",
        )
    svc = fleet.services[name]
    host = fleet.hosts[svc.host]
    address = svc.bind
    if svc.bind in {"0.0.0.0", "::"} and not host.is_local(svc.host):
        address = host.address or svc.host  # reach a remote host by its own address
    base = url_for(address, svc.port, "") if is_ip(address) else f"http://{address}:{svc.port}"
    return Target(
        label=name,
        base_url=base,
        model=svc.model_id(name),
        service=name,
        ctx_per_slot=svc.ctx_per_slot,
        parallel=svc.parallel,
        client=svc.client,
        key=service_key(loaded, name),
    )


LoadFleet = Callable[[Path | None], LoadedFleet]


def resolve(text: str, fleet_file: Path | None, load: LoadFleet) -> Target:
    """``text`` is a URL or a service of the fleet that ``load`` returns."""
    if is_url(text):
        return from_url(text)
    return from_service(load(fleet_file), text)


def with_model(target: Target, *, timeout: float = 10.0) -> Target:
    """A target whose model id is known: a URL's is the first id ``/v1/models`` lists."""
    if target.model is not None:
        return target
    with http.client(timeout=timeout, base_url=target.base_url, key=target.key) as client:
        try:
            response = client.get("/v1/models")
        except httpx.HTTPError as exc:
            raise ContractError(
                f"cannot reach {target.base_url}/v1/models: {type(exc).__name__}",
                where=target.label,
                hint="is the server running and listening on that address?",
            ) from exc
        http.raise_for_status(response, what="GET /v1/models")
        try:
            entries = response.json().get("data") or []
            first = str(entries[0]["id"])
        except (ValueError, AttributeError, IndexError, KeyError, TypeError):
            raise ContractError(
                f"{target.base_url}/v1/models lists no model id: {response.text[:200]!r}",
                where=target.label,
                hint="an OpenAI-compatible server lists its model ids under data[].id",
            ) from None
    return replace(target, model=first)
