"""The gateway's row of the status: is the front door up, and which backends does it reach?

Both answers come from LiteLLM itself:

- ``/health/readiness`` (no auth): the proxy is up and its router loaded;
  on this machine, also that the answering process is the recorded one
  (L-33), as for services;
- ``/health`` (with the key): LiteLLM calls every model of its config with
  a one-token request and lists ``healthy_endpoints`` and
  ``unhealthy_endpoints`` (with the error): each is matched back to its
  service by the ``api_base`` the gateway's config gives it.

The key is the gateway's ``LITELLM_MASTER_KEY``: read from ``keys_env`` when
the gateway runs on this machine, else from the client's own
``INFERFLEET_GATEWAY_KEY`` (the variable the rendered client configs name).
Without a key the backends are not asked, and the row says so.

States: ``healthy`` (ready, every backend reached), ``degraded`` (ready,
some backend not reached: named in ``unreachable``), ``down`` (nothing
answers), ``unhealthy`` (it answers, but not ready, or not with a
well-formed health answer), ``foreign`` (another process answers, L-33).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from inferfleet.backends import health as gate
from inferfleet.backends.ports import owned_by
from inferfleet.backends.process import alive
from inferfleet.backends.records import RecordStore
from inferfleet.documents import StatusGateway
from inferfleet.errors import FleetError
from inferfleet.fleetfile.exposure import url_for
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.io import token_scope
from inferfleet.render import gateway as render
from inferfleet.render.clients import GATEWAY_KEY_ENV
from inferfleet.render.endpoints import gateway_url

if TYPE_CHECKING:
    import httpx

GATEWAY_PROBLEMS = frozenset({"degraded", "down", "unhealthy", "foreign", "unknown"})
MAX_ERROR = 300  # characters of a backend's error kept for the row
HEALTH_TIMEOUT_S = 15.0  # LiteLLM waits up to HEALTH_CHECK_TIMEOUT_SECONDS (5) per backend


@dataclass(frozen=True)
class GatewayRow:
    host: str
    url: str  # base URL clients use (.../v1)
    state: str
    pid: int | None = None
    engine: str | None = None
    backends: dict[str, str] = field(default_factory=dict)  # service -> ok | its error
    unreachable: list[str] = field(default_factory=list)  # services it cannot reach
    detail: str = ""

    @property
    def problem(self) -> bool:
        return self.state in GATEWAY_PROBLEMS

    def to_json(self) -> StatusGateway:
        return StatusGateway(
            host=self.host,
            url=self.url,
            state=self.state,
            pid=self.pid,
            engine=self.engine,
            backends=dict(self.backends),
            unreachable=list(self.unreachable),
            detail=self.detail,
        )


class _Endpoint(BaseModel):
    """One entry of LiteLLM's /health lists (hostile input: only what we read, bounded)."""

    model_config = ConfigDict(extra="ignore")
    api_base: str | None = None
    model: str | None = None
    error: str | None = None


class _Health(BaseModel):
    model_config = ConfigDict(extra="ignore")
    healthy_endpoints: list[_Endpoint] = []
    unhealthy_endpoints: list[_Endpoint] = []


def master_key(loaded: LoadedFleet, environ: Mapping[str, str] | None = None) -> str | None:
    """The key to ask /health with: keys_env's on the gateway's host, else the client's."""
    env = os.environ if environ is None else environ
    gateway = loaded.fleet.gateway
    if gateway is not None and loaded.fleet.hosts[gateway.host].is_local(gateway.host):
        from inferfleet.deploy.facts import host_facts
        from inferfleet.deploy.gateway import read_keys

        try:
            keys = read_keys(Path(render.keys_path(gateway, host_facts(loaded.root))))
        except FleetError:
            keys = {}
        if render.MASTER_KEY_ENV in keys:
            return keys[render.MASTER_KEY_ENV]
    return env.get(GATEWAY_KEY_ENV) or None


def backends_of(data: Any, by_base: Mapping[str, str]) -> dict[str, str]:
    """``service -> ok | error`` from a /health answer; services it did not list are absent."""
    health = _Health.model_validate(data)
    found: dict[str, str] = {}
    for entry in health.unhealthy_endpoints:
        name = by_base.get((entry.api_base or "").rstrip("/"))
        if name is not None:
            error = " ".join((entry.error or "unreachable").split())[:MAX_ERROR]
            found[name] = error or "unreachable"
    for entry in health.healthy_endpoints:
        name = by_base.get((entry.api_base or "").rstrip("/"))
        if name is not None and name not in found:
            found[name] = "ok"
    return found


def read_gateway(
    loaded: LoadedFleet, client: httpx.Client, key: str | None = None
) -> GatewayRow | None:
    """The gateway's row, or None when the fleet declares no gateway."""
    import httpx

    fleet = loaded.fleet
    gateway = fleet.gateway
    if gateway is None:
        return None
    url = gateway_url(fleet) or ""
    base = url.removesuffix("/v1")
    local = fleet.hosts[gateway.host].is_local(gateway.host)
    if local:
        base = url_for(gateway.bind, gateway.port, "")
    pid, engine = _record(loaded) if local else (None, None)
    row = GatewayRow(gateway.host, url, "down", pid, engine)
    probe = gate.probe(client, base + render.READINESS_PATH)
    if probe.state == "down":
        return _replace(row, detail=f"nothing answers on {base} ({probe.detail})")
    if probe.state != "ok":
        return _replace(
            row,
            state="unhealthy",
            detail=f"{render.READINESS_PATH} answered {probe.status}: {probe.detail[:200]}",
        )
    if local and pid is not None and not owned_by(gateway.port, gateway.bind, pid):
        return _replace(row, state="foreign", detail="another process answers on its port (L-33)")
    if key is None:
        return _replace(
            row,
            state="healthy",
            detail=f"backends not asked: no key here (set {GATEWAY_KEY_ENV})",
        )
    if not token_scope.encrypted_or_local(token_scope.origin(base)):
        # The master key goes over https or to loopback only: on the LAN in plain
        # http anyone on the path would read it (the board asks every 2 s).
        return _replace(
            row,
            state="healthy",
            detail=f"backends not asked: the gateway answers plain http at {base}, beyond "
            "loopback, and the master key is never sent there (run status on the gateway's "
            "host, or declare proxy: and reach the gateway over https)",
        )
    by_base = {render.backend_url(fleet, n).rstrip("/"): n for n in render.check(fleet)}
    try:
        response = client.get(
            base + render.MODEL_HEALTH_PATH,
            headers={"Authorization": f"Bearer {key}"},
            timeout=HEALTH_TIMEOUT_S,
        )
    except httpx.TransportError as exc:
        return _replace(row, state="unhealthy", detail=f"/health failed: {type(exc).__name__}")
    if response.status_code != 200:
        return _replace(
            row,
            state="unhealthy",
            detail=f"/health answered {response.status_code}: {response.text[:200]}",
        )
    try:
        backends = backends_of(response.json(), by_base)
    except (ValueError, ValidationError):
        return _replace(row, state="unhealthy", detail="/health answered no health document")
    for name in by_base.values():
        backends.setdefault(name, "not in the gateway's answer")
    unreachable = [name for name, state in backends.items() if state != "ok"]
    state = "degraded" if unreachable else "healthy"
    detail = "; ".join(f"cannot reach {n}: {backends[n]}" for n in unreachable)
    return _replace(row, state=state, backends=backends, unreachable=unreachable, detail=detail)


def _record(loaded: LoadedFleet) -> tuple[int | None, str | None]:
    from inferfleet import paths

    gateway = loaded.fleet.gateway
    assert gateway is not None
    try:
        record = RecordStore(paths.state_dir(loaded.fleet.hosts[gateway.host]) / "services").read(
            render.NAME
        )
    except FleetError:
        return None, None
    if record is None or alive(record) is None:
        return None, None
    return record.pid, record.runtime_version or None


def _replace(row: GatewayRow, **changes: Any) -> GatewayRow:
    from dataclasses import replace

    return replace(row, **changes)
