"""Deploy the gateway on its host: install, configure, start, health-gate.

``up`` and ``apply`` call :func:`deploy` once the services of their run are
up and healthy, on the gateway's own host; the gateway is then started the
way services are:

1. its engine, a pinned LiteLLM, is installed once into its own venv under
   the runtime cache (:mod:`inferfleet.install.pinned_venv`, L-42);
2. its keys are read from ``keys_env`` (an untracked file, mode 600, L-55):
   ``LITELLM_MASTER_KEY`` must be there and start with ``sk-`` (LiteLLM only
   treats ``sk-`` keys as keys); the values go to the process's environment,
   never into a file inferfleet writes (L-54);
3. the rendered config is written (:func:`inferfleet.render.gateway.config`),
   and the one digest of argv, env, files and the key file decides: the
   running gateway with the same digest is kept, otherwise the old one is
   stopped by its recorded pid (or its unit restarted) and the new one
   started;
4. the health gate is the services' (L-33, L-34): ``/health/readiness``
   answering 200 from the gateway's own process (or its unit's MainPID).

Before starting, each fronted service's health is read once: the ones not
healthy are reported (the gateway still starts; it answers for them with a
clear error until they are back, and ``status`` shows which it cannot reach).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from inferfleet.backends import health as gate
from inferfleet.backends.process import ProcessBackend, StopResult
from inferfleet.backends.records import ServiceRecord
from inferfleet.backends.systemd import Systemctl, wait_unit_healthy
from inferfleet.deploy import frontdoor
from inferfleet.deploy.starting import start_gated
from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet, Gateway
from inferfleet.install import pinned_venv
from inferfleet.io import http
from inferfleet.io.archive import Archive, Keeper
from inferfleet.io.become import for_scope
from inferfleet.io.files import write_if_changed
from inferfleet.render import gateway as render
from inferfleet.render.facts import HostFacts
from inferfleet.render.service_keys import front_variable, keyed

Note = Callable[[str], None]
KEY_PREFIX = "sk-"
UNIT_SPEC = "gateway-unit.spec"


class GatewayKeysError(UsageError):
    """The gateway's key file is missing, unreadable, too open or lacks the master key."""


@dataclass(frozen=True)
class GatewayResult:
    action: str  # started | restarted | unchanged
    url: str
    pid: int | None
    engine: str  # "litellm 1.106.12"
    seconds_to_healthy: float | None
    reason: str = ""
    unhealthy_backends: list[str] = field(default_factory=list)  # fronted, not healthy at start


def engine_pin(gateway: Gateway) -> pinned_venv.Pin:
    """The gateway's engine as the pinned-venv installer takes it (L-42)."""
    engine = gateway.engine
    return pinned_venv.Pin(
        render.KIND,
        engine.package,
        engine.version,
        render.MODULE,
        tuple(engine.extras),
        companions=render.companions(engine.package),
        hint="pin a LiteLLM release whose package carries the proxy "
        "(litellm.proxy.proxy_cli), with extras: [proxy]",
    )


def install_engine(gateway: Gateway, note: Note) -> pinned_venv.InstalledVenv:
    """The engine's venv: installed once, found in the cache afterwards."""
    pin = engine_pin(gateway)
    done = pinned_venv.installed(pin)
    if done is None:
        note(f"{pin.requirement} is not installed yet; installing it once")
        done, _ = pinned_venv.install(pin, on_phase=note)
    return done


def read_keys(path: Path) -> dict[str, str]:
    """The gateway's key file: present, private (mode 600), with an ``sk-`` master key."""
    _text, values = frontdoor.read_private_env(
        path,
        error=GatewayKeysError,
        where=f"gateway.keys_env ({path})",
        create_hint=f"create it on the gateway's host, untracked, mode 600, with a line "
        f"{render.MASTER_KEY_ENV}=sk-<a long random string> (L-55)",
    )
    key = values.get(render.MASTER_KEY_ENV, "")
    if not key.startswith(KEY_PREFIX) or len(key) < 16:
        raise GatewayKeysError(
            f"the gateway's key file {path} has no usable {render.MASTER_KEY_ENV}",
            where=f"gateway.keys_env ({path})",
            hint=f"add {render.MASTER_KEY_ENV}=sk-<at least 13 random characters>: LiteLLM "
            "only takes keys that start with sk-, and without one its proxy is open",
        )
    return values


def backend_keys(fleet: Fleet, keys: Mapping[str, str], path: Path) -> None:
    """Every fronted service beyond loopback requires its key (L-58): the gateway's key
    file holds it under ``INFERFLEET_KEY_<SERVICE>``, which its config names."""
    missing = [
        front_variable(name)
        for name in render.check(fleet)
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


keys_digest = frontdoor.keys_digest


def record_template(launch: render.GatewayLaunch, spec: str, engine: str) -> ServiceRecord:
    return frontdoor.front_record(
        render.NAME,
        host=launch.host,
        argv=launch.argv,
        bind=launch.bind,
        port=launch.port,
        spec=spec,
        health_path=render.READINESS_PATH,
        engine=engine,
    )


def backend_states(fleet: Fleet, timeout: float = 2.0) -> dict[str, str]:
    """Each fronted service's health as the gateway's host reaches it: ok | loading | down..."""
    found: dict[str, str] = {}
    with http.client(timeout=timeout, plain_http=True) as client:
        for name in render.check(fleet):
            base = render.backend_url(fleet, name).removesuffix("/v1")
            found[name] = gate.probe(client, base + fleet.services[name].health.path).state
    return found


def gateway_launch(fleet: Fleet, facts: HostFacts, state_dir: Path) -> render.GatewayLaunch:
    """The launch as deployed here: a process-backend gateway's config lives in the state dir
    (beside its record and log); a unit's where the unit reads it (render's path)."""
    gateway = render.required(fleet)
    folder = str(state_dir / "gateway") if gateway.backend == "process" else None
    return render.gateway_launch(fleet, facts, folder=folder)


def deploy(
    fleet: Fleet,
    facts: HostFacts,
    state_dir: Path,
    *,
    note: Note = lambda _text: None,
    on_state: gate.StateFn | None = None,
    environ: Mapping[str, str] | None = None,
) -> GatewayResult:
    """Bring the gateway to what the fleet says, on this host (its ``gateway.host``)."""
    gateway = render.required(fleet)
    launch = gateway_launch(fleet, facts, state_dir)
    keys = read_keys(Path(launch.keys_env))  # first: a bad key file installs and writes nothing
    backend_keys(fleet, keys, Path(launch.keys_env))
    if launch.image is None:
        venv = install_engine(gateway, note)
        engine = f"{venv.package} {venv.version}"
    else:
        engine = f"{gateway.engine.package} {gateway.engine.version} ({launch.image})"
    spec = launch.spec(keys_digest(keys))
    states = backend_states(fleet)
    unhealthy = [name for name, state in states.items() if state != "ok"]
    if unhealthy:
        note(
            "gateway: fronted services not healthy now (it answers for them with an error "
            f"until they are): {', '.join(unhealthy)}"
        )
    # A unit or config in root's folders is written as the host's `become` says; other bytes
    # found there are archived first, as for services (nothing is deleted).
    scope = launch.scope if launch.backend in {"systemd", "quadlet"} else "user"
    become = for_scope(gateway.host, fleet.hosts[gateway.host].become, scope)
    keeper = Keeper(Archive(state_dir), service=render.NAME, revision="", become=become)
    changed = False
    for file in launch.files:
        changed |= keeper.replace(Path(file.path), file.content, mode=0o644)
    if launch.backend in {"systemd", "quadlet"}:
        # The unit's digest, keys included, kept beside the records: a changed key restarts it.
        changed |= write_if_changed(state_dir / UNIT_SPEC, spec + "\n", mode=0o600)
        return _deploy_unit(launch, Systemctl(scope, become), engine, changed, unhealthy, on_state)
    backend = ProcessBackend(state_dir)

    def answers(_record: ServiceRecord) -> bool:
        with http.client(timeout=2.0, plain_http=True) as client:
            return gate.probe(client, launch.url + render.READINESS_PATH).state == "ok"

    decision = frontdoor.keep_or_stop(
        backend, render.NAME, spec, answers, grace=render.STOP_GRACE_S
    )
    if decision.kept is not None:
        return GatewayResult(
            "unchanged", launch.url + "/v1", decision.kept.pid, engine,
            decision.kept.healthy_after_s, decision.reason, unhealthy,
        )  # fmt: skip
    process_env = frontdoor.process_environment(environ, keys, launch.env)
    record, health = start_gated(
        backend,
        record_template(launch, spec, engine),
        env=process_env,
        timeout=launch.health_timeout,
        on_state=on_state,
    )
    return GatewayResult(
        decision.action, launch.url + "/v1", record.pid, engine, round(health.seconds, 3),
        decision.reason, unhealthy,
    )  # fmt: skip


def _deploy_unit(
    launch: render.GatewayLaunch,
    systemctl: Systemctl,
    engine: str,
    changed: bool,
    unhealthy: list[str],
    on_state: gate.StateFn | None,
) -> GatewayResult:
    """systemd / Quadlet: the unit (or .container) file installed, restarted when anything it
    runs changed; a Quadlet unit is generated at daemon-reload and enabled by its [Install]."""
    unit = launch.unit_name
    state = systemctl.show(unit)
    if changed:
        systemctl.daemon_reload()
    if not changed and state.running:
        return GatewayResult(
            "unchanged", launch.url + "/v1", state.main_pid, engine, None,
            "already running with this spec", unhealthy,
        )  # fmt: skip
    if launch.backend == "systemd":
        systemctl.enable(unit)
    systemctl.restart(unit)
    health = wait_unit_healthy(
        systemctl,
        unit,
        service=render.NAME,
        bind=launch.bind,
        port=launch.port,
        path=render.READINESS_PATH,
        timeout=launch.health_timeout,
        on_state=on_state,
    )
    after = systemctl.show(unit)
    action = "restarted" if state.running else "started"
    return GatewayResult(
        action, launch.url + "/v1", after.main_pid, engine, round(health.seconds, 3),
        "unit changed" if changed else "", unhealthy,
    )  # fmt: skip


def stop(state_dir: Path, *, grace: float = render.STOP_GRACE_S) -> StopResult:
    """Stop a process-backend gateway by its recorded pid (L-43)."""
    return ProcessBackend(state_dir).stop(render.NAME, grace=grace)
