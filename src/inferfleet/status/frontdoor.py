"""The front door's rows of the status: the gateway (LiteLLM) and the auth proxy (Caddy).

One row type for both (:class:`FrontRow`): the part, its host, the URL
clients use, its state, its recorded pid and engine on this machine, and what
it reaches behind it, by name (``ok`` or what answered instead).

States: ``healthy`` (up, everything behind it answers), ``degraded`` (up,
something behind it does not: named in ``reached``), ``down`` (nothing
answers), ``unhealthy`` (it answers, but not ready, or not with a well-formed
health answer), ``foreign`` (another process answers, L-33), ``unknown`` (a
proxy on another host with a local CA whose root could not be read there).

**The gateway**: both answers come from LiteLLM itself:

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

**The proxy**:

- Caddy's own ``/healthz`` (no key), over HTTPS, trusting only the root of
  its local CA under ``tls internal`` (from its data dir in the state dir; for
  a proxy on another host, the root that host's facts carry over ssh), else
  the environment's CAs (``acme``); on this machine, also that the answering
  process is the recorded one (L-33);
- each upstream through Caddy, with a key: the gateway's liveliness path and
  ``/<service>/<health path>`` for each service of ``proxy.services``. Caddy
  answers 503 at once for an upstream its health checks found down. The key
  is the proxy's first key from ``keys_env`` when it runs on this machine;
  without one (another host, or ``forward_auth``) the upstreams are not
  asked, and the row says so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from inferfleet import paths
from inferfleet.backends import health as gate
from inferfleet.backends.ports import owned_by
from inferfleet.backends.process import alive
from inferfleet.backends.records import RecordStore
from inferfleet.documents import StatusGateway, StatusProxy, document_of
from inferfleet.errors import FleetError
from inferfleet.fleetfile.exposure import url_for
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.io import token_scope
from inferfleet.render import caddy as render_caddy
from inferfleet.render import gateway as render
from inferfleet.render import proxy as render_proxy
from inferfleet.render.clients import GATEWAY_KEY_ENV
from inferfleet.render.endpoints import gateway_url

if TYPE_CHECKING:
    import httpx

FRONT_PROBLEMS = frozenset({"degraded", "down", "unhealthy", "foreign", "unknown"})
MAX_ERROR = 300  # characters of a backend's error kept for the row
HEALTH_TIMEOUT_S = 15.0  # LiteLLM waits up to HEALTH_CHECK_TIMEOUT_SECONDS (5) per backend
THROUGH_TIMEOUT_S = 10.0  # an upstream asked through Caddy


@dataclass(frozen=True)
class FrontRow:
    name: str  # gateway | proxy
    host: str
    url: str  # what clients use: the gateway's .../v1, the proxy's https://name:port
    state: str
    pid: int | None = None
    engine: str | None = None
    # What it reaches behind it: the gateway's backends (service -> ok | LiteLLM's error),
    # the proxy's upstreams (gateway or service -> ok | what answered through Caddy).
    reached: dict[str, str] = field(default_factory=dict)
    detail: str = ""

    @property
    def problem(self) -> bool:
        return self.state in FRONT_PROBLEMS

    @property
    def unreachable(self) -> list[str]:
        return [name for name, state in self.reached.items() if state != "ok"]

    def gateway_json(self) -> StatusGateway:
        return document_of(StatusGateway, self, backends=dict(self.reached))

    def proxy_json(self) -> StatusProxy:
        return document_of(StatusProxy, self, upstreams=dict(self.reached))


def _record(loaded: LoadedFleet, name: str, host: str) -> tuple[int | None, str | None]:
    """The recorded pid and engine of a front-door process of this machine, when it lives."""
    try:
        record = RecordStore(paths.state_dir(loaded.fleet.hosts[host])).read(name)
    except FleetError:
        return None, None
    if record is None or alive(record) is None:
        return None, None
    return record.pid, record.runtime_version or None


def _answering(row: FrontRow, probe: gate.Probe, base: str, path: str, bind: str,
               port: int, local: bool) -> FrontRow | None:  # fmt: skip
    """The row when its own health answer already decides it (down, unhealthy, foreign)."""
    if probe.state == "down":
        return replace(row, detail=f"nothing answers on {base} ({probe.detail})")
    if probe.state != "ok":
        return replace(
            row, state="unhealthy", detail=f"{path} answered {probe.status}: {probe.detail[:200]}"
        )
    if local and row.pid is not None and not owned_by(port, bind, row.pid):
        return replace(row, state="foreign", detail="another process answers on its port (L-33)")
    return None


# ---------------------------------------------------------------- the gateway


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
        from inferfleet.deploy.frontdoor import read_keys

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
) -> FrontRow | None:
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
    pid, engine = _record(loaded, render.NAME, gateway.host) if local else (None, None)
    row = FrontRow(render.NAME, gateway.host, url, "down", pid, engine)
    probe = gate.probe(client, base + render.READINESS_PATH)
    decided = _answering(row, probe, base, render.READINESS_PATH, gateway.bind, gateway.port, local)
    if decided is not None:
        return decided
    if key is None:
        return replace(
            row,
            state="healthy",
            detail=f"backends not asked: no key here (set {GATEWAY_KEY_ENV})",
        )
    if not token_scope.encrypted_or_local(token_scope.origin(base)):
        # The master key goes over https or to loopback only: on the LAN in plain
        # http anyone on the path would read it (the board asks every 2 s).
        return replace(
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
        return replace(row, state="unhealthy", detail=f"/health failed: {type(exc).__name__}")
    if response.status_code != 200:
        return replace(
            row,
            state="unhealthy",
            detail=f"/health answered {response.status_code}: {response.text[:200]}",
        )
    try:
        backends = backends_of(response.json(), by_base)
    except (ValueError, ValidationError):
        return replace(row, state="unhealthy", detail="/health answered no health document")
    for name in by_base.values():
        backends.setdefault(name, "not in the gateway's answer")
    unreachable = [name for name, state in backends.items() if state != "ok"]
    detail = "; ".join(f"cannot reach {n}: {backends[n]}" for n in unreachable)
    return replace(
        row, state="degraded" if unreachable else "healthy", reached=backends, detail=detail
    )


# ---------------------------------------------------------------- the auth proxy


def proxy_key(loaded: LoadedFleet) -> str | None:
    """A key the proxy takes: the first of ``keys_env`` on the proxy's own host, else None."""
    from inferfleet.deploy import frontdoor
    from inferfleet.deploy.facts import host_facts

    proxy = loaded.fleet.proxy
    if proxy is None or not loaded.fleet.hosts[proxy.host].is_local(proxy.host):
        return None
    names = list(proxy.key_names) if proxy.auth == "bearer" else []  # what clients send
    if not names:
        return None
    try:
        keys, _path = frontdoor.proxy_keys(loaded.fleet, host_facts(loaded.root))
    except FleetError:
        return None
    return keys.get(names[0])


def upstream_paths(loaded: LoadedFleet) -> dict[str, str]:
    """Each upstream's health path as reached through Caddy."""
    fleet = loaded.fleet
    proxy = fleet.proxy
    assert proxy is not None
    found = {
        name: f"/{name}{fleet.services[name].health.path}" for name in proxy.services
    }  # fmt: skip
    if fleet.gateway is not None:
        found["gateway"] = render_caddy.GATEWAY_HEALTH_PATH
    return found


def read_proxy(
    loaded: LoadedFleet,
    key: str | None = None,
    *,
    remote_root: str | None = None,
    remote_note: str = "",
) -> FrontRow | None:
    """The proxy's row, or None when the fleet declares no proxy.

    ``remote_root``: the local CA root (PEM) of a proxy on another host, read there over
    ssh; without it such a proxy is ``unknown`` (``remote_note`` says why it was not read).
    """
    from inferfleet.deploy import frontdoor

    fleet = loaded.fleet
    proxy = fleet.proxy
    if proxy is None:
        return None
    local = fleet.hosts[proxy.host].is_local(proxy.host)
    url = render_proxy.client_url(proxy)
    pid, engine = _record(loaded, frontdoor.PROXY, proxy.host) if local else (None, None)
    row = FrontRow(frontdoor.PROXY, proxy.host, url, "down", pid, engine)
    name = render_proxy.server_name(proxy)
    target = gate.TlsTarget(None, name)  # acme: a publicly issued certificate
    if proxy.tls == "internal" and local:
        target = gate.TlsTarget(frontdoor.ca_root(paths.state_dir(fleet.hosts[proxy.host])), name)
    elif proxy.tls == "internal":
        if remote_root is None:
            why = remote_note or "not read"
            return replace(
                row, state="unknown", detail=f"its local CA's root is on its host: {why}"
            )
        target = gate.TlsTarget(None, name, pem=remote_root)
    base = url_for(proxy.bind, proxy.port, "", scheme="https") if local else url
    probe = gate.probe_tls(base + render_caddy.HEALTH_PATH, target)
    decided = _answering(row, probe, base, render_caddy.HEALTH_PATH, proxy.bind, proxy.port, local)
    if decided is not None:
        return decided
    if key is None:
        return replace(row, state="healthy", detail="upstreams not asked: no key here")
    upstreams = {
        name: _through(base + path, target, key) for name, path in upstream_paths(loaded).items()
    }
    bad = [name for name, state in upstreams.items() if state != "ok"]
    detail = "; ".join(f"{name}: {upstreams[name]}" for name in bad)
    return replace(row, state="degraded" if bad else "healthy", reached=upstreams, detail=detail)


def _through(url: str, target: gate.TlsTarget, key: str) -> str:
    """``ok``, or what answered instead, for one upstream asked through Caddy with the key."""
    probe = gate.probe_tls(
        url, target, timeout=THROUGH_TIMEOUT_S, headers={"Authorization": f"Bearer {key}"}
    )
    if probe.state == "ok":
        return "ok"
    if probe.status is None:
        return f"failed: {probe.detail}"
    return f"HTTP {probe.status}: {' '.join(probe.detail.split())}"
