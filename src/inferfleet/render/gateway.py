"""The gateway rendered from the fleet: LiteLLM's config, argv, unit and digest.

The fleet's one OpenAI-compatible endpoint is a LiteLLM proxy. Everything it
runs is a pure function of the fleet file and the host's facts, like a
service's launch (:mod:`inferfleet.render.pipeline`):

- :func:`config`: LiteLLM's ``config.yaml`` as a dict: one ``model_list``
  entry per fronted service, named by its alias, pointing at the address its
  exposure makes it listen on (:func:`inferfleet.render.exposure.listen_address`),
  with the per-slot window and ``max_tokens`` of the client contract (L-25,
  L-26) and the service's request timeout (long generations need minutes);
- the keys: never in the config. LiteLLM reads ``os.environ/NAME`` references
  at start, from the environment the backend gives it out of ``keys_env``
  (an untracked mode-600 file on the host, L-55); the config and the unit
  name the file, never a value (L-54: nothing to expand, nothing to leak);
- :func:`gateway_launch`: argv (the pinned venv's Python running
  ``litellm.proxy.proxy_cli``), its environment, the files installed for it,
  and one digest over all of it, so ``up`` and ``apply`` restart it only
  when something it runs changed.

The health gate asks ``/health/readiness`` (LiteLLM's readiness probe: 200
once the router is loaded, no auth, no model calls); ``status`` asks the
authenticated ``/health`` which fronted backends answer.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Final

import yaml

from inferfleet.errors import UsageError
from inferfleet.fleetfile.exposure import url_for
from inferfleet.fleetfile.fleet import Fleet, Gateway
from inferfleet.render.clients import NO_KEY, model_entry
from inferfleet.render.endpoints import dial_address
from inferfleet.render.exposure import gateway_services, listen_address
from inferfleet.render.facts import HostFacts
from inferfleet.render.frontdoor import FrontLaunch, relabels, with_units
from inferfleet.render.launch import Mount
from inferfleet.render.launch_parts import InstallFile
from inferfleet.render.service_keys import front_variable, keyed
from inferfleet.runtimes.pinned import VENV_PYTHON, package_venv_relpath

NAME: Final = "gateway"  # its record, marker-free state and log are filed under this name
KIND: Final = "litellm"  # the folder under runtimes/ holding its venv
MODULE: Final = "litellm.proxy.proxy_cli"
# LiteLLM's own names: the master key clients send as `Authorization: Bearer ...`.
MASTER_KEY_ENV: Final = "LITELLM_MASTER_KEY"
READINESS_PATH: Final = "/health/readiness"  # 200 when ready; no auth, no LLM calls
LIVENESS_PATH: Final = "/health/liveliness"
# How long LiteLLM's uvicorn keeps an idle client connection (its default is 5 s): a client
# (the auth proxy, an SDK) reuses it between requests seconds apart instead of dialling
# again. Caddy drops its idle connections to it earlier (render.caddy).
KEEPALIVE_S: Final = 75
MODEL_HEALTH_PATH: Final = "/health"  # authenticated; calls every model: healthy/unhealthy
# What LiteLLM needs that the fleet decides, not the operator's shell: the model
# cost map bundled with the package (it fetches one from GitHub at start
# otherwise, which an offline host waits on), and no telemetry.
ENGINE_ENV: Final = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    # Warnings and errors only: INFO writes LiteLLM's and uvicorn's access lines per request.
    "LITELLM_LOG": "WARNING",
    # LiteLLM builds a new OpenAI client, so a new TLS context, for every streamed
    # /v1/completions request: from a CA directory (looked up at a handshake) that costs
    # under 1 ms, from certifi's bundle (parsed each time) 24-42 ms. Backends are plain HTTP.
    "SSL_CERT_DIR": "/etc/ssl/certs",
    # /health (status' question) waits this long per backend, not LiteLLM's default minute.
    "HEALTH_CHECK_TIMEOUT_SECONDS": "5",
}
CONTAINER_CONFIG: Final = "/etc/litellm/config.yaml"  # where a Quadlet gateway reads it


def required(fleet: Fleet) -> Gateway:
    if fleet.gateway is None:
        raise UsageError(
            "the fleet declares no gateway",
            hint="add gateway: {host: ..., keys_env: ...} to fleet.yaml",
        )
    return fleet.gateway


def check(fleet: Fleet) -> list[str]:
    """The services the gateway fronts, once they can be fronted; UsageError otherwise."""
    required(fleet)
    if NAME in fleet.services:
        raise UsageError(
            f"a service is named {NAME!r}, the name of the gateway's unit and record",
            where=f"services.{NAME}",
            hint="rename that service",
        )
    # The services and timeouts it names exist and are llm services (fleetfile.refs).
    names = gateway_services(fleet)
    aliases: dict[str, str] = {}
    for name in names:
        alias = fleet.services[name].model_id(name)
        if alias in aliases:
            raise UsageError(
                f"services {aliases[alias]!r} and {name!r} both serve the alias {alias!r}: "
                "the gateway routes by alias",
                where=f"services.{name}.alias",
                hint="give each fronted service its own alias",
            )
        aliases[alias] = name
    if not names:
        raise UsageError(
            "the gateway fronts no service",
            where="gateway.services",
            hint="declare an llm service, or list the ones it fronts",
        )
    return names


def backend_url(fleet: Fleet, name: str) -> str:
    """Where the gateway reaches service ``name``: the address it listens on (its exposure
    decides it, L-58); a wildcard bind is reached on the host's address, or on loopback
    when the gateway runs on that same host. The gateway is a process or a Quadlet
    container on the host's network (:func:`quadlet_unit`), never in a container network:
    its host's loopback is its own (:func:`inferfleet.render.endpoints.dial_address`, L-57)."""
    service = fleet.services[name]
    bind = listen_address(fleet, name)
    address = dial_address(fleet, service.host, bind, service.port, from_host=required(fleet).host)
    return f"http://{address}/v1"


def timeout_s(gateway: Gateway, name: str) -> float:
    return float(gateway.timeouts.get(name, gateway.timeout))


def config(fleet: Fleet) -> dict[str, Any]:
    """LiteLLM's ``config.yaml`` for the fleet's gateway, as data (keys by reference only)."""
    gateway = required(fleet)
    models = []
    for name in check(fleet):
        seconds = timeout_s(gateway, name)
        # A backend beyond loopback requires its key (client.keys): LiteLLM reads it from
        # its environment at start, out of keys_env, never written here.
        key = f"os.environ/{front_variable(name)}" if keyed(fleet, name) else NO_KEY
        entry = model_entry(fleet, name, api_base=backend_url(fleet, name), api_key=key)
        # Per model: LiteLLM waits this long for a whole answer, and as long for a stream's
        # next chunk; a long generation on a busy slot takes minutes.
        entry["litellm_params"]["timeout"] = seconds
        entry["litellm_params"]["stream_timeout"] = seconds
        # /health asks every model for one token: enough to prove the backend answers.
        entry["model_info"]["health_check_max_tokens"] = 1
        models.append(entry)
    return {
        "model_list": models,
        "litellm_settings": {
            "request_timeout": float(gateway.timeout),
            # A backend's error is the client's answer: no retries onto the same slot.
            "num_retries": 0,
        },
        "router_settings": {"num_retries": 0, "timeout": float(gateway.timeout)},
        "general_settings": {
            # Read by LiteLLM from its environment at start: the value stays in keys_env.
            "master_key": f"os.environ/{MASTER_KEY_ENV}",
        },
    }


def config_yaml(fleet: Fleet) -> str:
    text = yaml.safe_dump(config(fleet), sort_keys=False, default_flow_style=False, width=100)
    return "# LiteLLM proxy config of the fleet's gateway, rendered by inferfleet.\n" + text


# ---------------------------------------------------------------- launch


def venv_relpath(gateway: Gateway) -> PurePosixPath:
    engine = gateway.engine
    return package_venv_relpath(
        KIND, engine.package, engine.version, tuple(engine.extras), companions(engine.package)
    )


# LiteLLM's proxy imports prisma on its auth-failure path even without a database
# (litellm.proxy.db.exception_handler, 1.106.12): without it a request with no key or a
# wrong key is answered 500, not 401. `proxy` does not declare it; `extra_proxy` does,
# with Azure, Google and Postgres clients the gateway never uses. Pinned (L-42).
COMPANIONS: Final[dict[str, tuple[str, ...]]] = {"litellm": ("prisma==0.15.0",)}


def companions(package: str) -> tuple[str, ...]:
    """Exact pins installed with the engine package (what it needs but does not declare)."""
    return COMPANIONS.get(package.lower(), ())


def config_dir(facts: HostFacts, gateway: Gateway) -> str:
    scope = gateway.scope if gateway.backend in {"systemd", "quadlet"} else "user"
    return f"{facts.config_dir(scope)}/gateway"


def gateway_launch(fleet: Fleet, facts: HostFacts, *, folder: str | None = None) -> FrontLaunch:
    """The gateway's launch on its host (facts: that host's paths).

    ``folder``: where its config goes, when not the default (:func:`config_dir`): a
    process-backend gateway keeps it in the state dir beside its record and log.
    """
    gateway = required(fleet)
    check(fleet)
    folder = config_dir(facts, gateway) if folder is None else folder
    config_path = f"{folder}/litellm.yaml"
    listen = ["--host", gateway.bind, "--port", str(gateway.port), "--num_workers", "1",
              "--keepalive_timeout", str(KEEPALIVE_S)]  # fmt: skip
    if gateway.backend == "quadlet":
        # The image's own entrypoint runs LiteLLM's CLI; the config is mounted read-only.
        argv = ["--config", CONTAINER_CONFIG, *listen]
    else:
        python = f"{facts.cache_dir}/{venv_relpath(gateway) / VENV_PYTHON}"
        argv = [python, "-m", MODULE, "--config", config_path, *listen]
    launch = FrontLaunch(
        name=NAME,
        host=gateway.host,
        bind=gateway.bind,
        port=gateway.port,
        backend=gateway.backend,
        scope=gateway.scope,
        argv=argv,
        env=dict(ENGINE_ENV),
        keys_env=keys_path(gateway, facts),
        url=url_for(gateway.bind, gateway.port, ""),
        health_path=READINESS_PATH,
        health_timeout=float(gateway.health_timeout),
        files=[InstallFile(config_path, config_yaml(fleet), "config")],
        image=gateway.engine.image,
    )
    return with_units(
        launch,
        facts,
        description=f"inferfleet gateway: LiteLLM proxy on {gateway.bind}:{gateway.port}",
        volumes=[Mount(config_path, CONTAINER_CONFIG, read_only=True)],
        relabel=relabels(fleet, gateway.host),
    )


def keys_path(gateway: Gateway, facts: HostFacts) -> str:
    """The gateway's key file's absolute path on the host (:func:`key_file_path`)."""
    return key_file_path(gateway.keys_env, facts, where="gateway.keys_env")


def key_file_path(value: str, facts: HostFacts, *, where: str) -> str:
    """A key file's absolute path on the host: ``~`` is its home, a relative path is
    relative to the fleet file's folder (as every path in the fleet file)."""
    path = facts.expand(value)
    if not path.startswith("/") and facts.fleet_dir:
        path = f"{facts.fleet_dir.rstrip('/')}/{path}"
    if not path.startswith("/"):
        raise UsageError(
            f"{where} {value!r} is relative, and the fleet file's folder on the host is not known",
            where=where,
            hint="give an absolute path or ~/..., e.g. ~/.config/inferfleet/secrets/gateway.env",
        )
    return path
