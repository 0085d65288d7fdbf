"""The auth proxy's row of the status: is Caddy up, and do its upstreams answer through it?

- Caddy's own ``/healthz`` (no key), over HTTPS: on the proxy's host
  trusting only the root of its local CA (``tls internal``, from its data dir
  in the state dir), else the environment's CAs (``acme``); on this machine,
  also that the answering process is the recorded one (L-33);
- each upstream through Caddy, with a key: the gateway's liveliness path and
  ``/<service>/<health path>`` for each service of ``proxy.services``. Caddy
  answers 503 at once for an upstream its health checks found down. The key
  is the proxy's first key from ``keys_env`` when it runs on this machine;
  without one (another host, or ``forward_auth``) the upstreams are not
  asked, and the row says so.

States: ``healthy`` (up, every upstream answers), ``degraded`` (up, some
upstream does not: named in ``upstreams``), ``down`` (nothing answers),
``unhealthy`` (it answers, not 200), ``foreign`` (another process answers,
L-33), ``unknown`` (a remote proxy with a local CA: its root is on its host).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from inferfleet import paths
from inferfleet.backends import health as gate
from inferfleet.backends.ports import owned_by
from inferfleet.backends.process import alive
from inferfleet.backends.records import RecordStore
from inferfleet.documents import StatusProxy
from inferfleet.errors import FleetError
from inferfleet.fleetfile.exposure import url_for
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.render import caddy as render

PROXY_PROBLEMS = frozenset({"degraded", "down", "unhealthy", "foreign", "unknown"})
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ProxyRow:
    host: str
    url: str  # https://name:port
    state: str
    pid: int | None = None
    engine: str | None = None
    upstreams: dict[str, str] = field(default_factory=dict)  # name -> ok | what answered
    detail: str = ""

    @property
    def problem(self) -> bool:
        return self.state in PROXY_PROBLEMS

    def to_json(self) -> StatusProxy:
        return StatusProxy(
            host=self.host,
            url=self.url,
            state=self.state,
            pid=self.pid,
            engine=self.engine,
            upstreams=dict(self.upstreams),
            detail=self.detail,
        )


def proxy_key(loaded: LoadedFleet) -> str | None:
    """A key the proxy takes: the first of ``keys_env`` on the proxy's own host, else None."""
    from inferfleet.deploy import proxy as deploy
    from inferfleet.deploy.facts import host_facts

    proxy = loaded.fleet.proxy
    if proxy is None or not loaded.fleet.hosts[proxy.host].is_local(proxy.host):
        return None
    names = list(proxy.key_names) if proxy.auth == "bearer" else []  # what clients send
    if not names:
        return None
    state_dir = paths.state_dir(loaded.fleet.hosts[proxy.host])
    try:
        env, _digest = deploy.read_keys(
            loaded.fleet, host_facts(loaded.root), deploy.folder(state_dir) / "data"
        )
    except FleetError:
        return None
    return env.get(names[0])


def upstream_paths(loaded: LoadedFleet) -> dict[str, str]:
    """Each upstream's health path as reached through Caddy."""
    fleet = loaded.fleet
    proxy = fleet.proxy
    assert proxy is not None
    found = {
        name: f"/{name}{fleet.services[name].health.path}" for name in proxy.services
    }  # fmt: skip
    if fleet.gateway is not None:
        found["gateway"] = render.GATEWAY_HEALTH_PATH
    return found


def read_proxy(loaded: LoadedFleet, key: str | None = None) -> ProxyRow | None:
    """The proxy's row, or None when the fleet declares no proxy."""
    from inferfleet.deploy import proxy as deploy

    fleet = loaded.fleet
    proxy = fleet.proxy
    if proxy is None:
        return None
    local = fleet.hosts[proxy.host].is_local(proxy.host)
    url = deploy.client_url(proxy)
    pid, engine = _record(loaded) if local else (None, None)
    row = ProxyRow(proxy.host, url, "down", pid, engine)
    state_dir = paths.state_dir(fleet.hosts[proxy.host])
    root = None
    if proxy.tls == "internal":
        if not local:
            return replace(
                row, state="unknown", detail="its local CA's root is on its host: ask there"
            )
        root = deploy.ca_root(state_dir)
    target = gate.TlsTarget(root, deploy.server_name(proxy))
    base = url_for(proxy.bind, proxy.port, "", scheme="https") if local else url
    probe = gate.probe_tls(base + render.HEALTH_PATH, target)
    if probe.state == "down":
        return replace(row, detail=f"nothing answers on {base} ({probe.detail})")
    if probe.state != "ok":
        return replace(
            row,
            state="unhealthy",
            detail=f"{render.HEALTH_PATH} answered {probe.status}: {probe.detail[:200]}",
        )
    if local and pid is not None and not owned_by(proxy.port, proxy.bind, pid):
        return replace(row, state="foreign", detail="another process answers on its port (L-33)")
    if key is None:
        return replace(row, state="healthy", detail="upstreams not asked: no key here")
    upstreams = {
        name: _through(base + path, target, key) for name, path in upstream_paths(loaded).items()
    }
    bad = [name for name, state in upstreams.items() if state != "ok"]
    detail = "; ".join(f"{name}: {upstreams[name]}" for name in bad)
    return replace(row, state="degraded" if bad else "healthy", upstreams=upstreams, detail=detail)


def _through(url: str, target: gate.TlsTarget, key: str) -> str:
    """``ok``, or what answered instead, for one upstream asked through Caddy with the key."""
    probe = gate.probe_tls(
        url, target, timeout=TIMEOUT_S, headers={"Authorization": f"Bearer {key}"}
    )
    if probe.state == "ok":
        return "ok"
    if probe.status is None:
        return f"failed: {probe.detail}"
    return f"HTTP {probe.status}: {' '.join(probe.detail.split())}"


def _record(loaded: LoadedFleet) -> tuple[int | None, str | None]:
    from inferfleet.deploy import proxy as deploy

    proxy = loaded.fleet.proxy
    assert proxy is not None
    try:
        store = RecordStore(paths.state_dir(loaded.fleet.hosts[proxy.host]) / "services")
        record = store.read(deploy.NAME)
    except FleetError:
        return None, None
    if record is None or alive(record) is None:
        return None, None
    return record.pid, record.runtime_version or None
