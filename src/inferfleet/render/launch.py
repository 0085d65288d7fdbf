"""Resolve a service into what its unit runs: argv, mounts, environment, ports.

This is the one place that decides where files are for a server: on the host
(a process or systemd unit) or inside its container (mounted read-only under
``/models``; compile caches on a persistent ``/cache`` mount, L-37; a
writable ``HOME`` there, L-39). Where it listens is decided once, by
:func:`inferfleet.render.exposure.listen_address` (L-58): the ``--host`` of
every adapter on the host's network, the published port of a bridged container
(which itself listens on every address of its own namespace).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from inferfleet.fleetfile.fleet import Fleet, Host, Runtime, Service
from inferfleet.render import facts as paths
from inferfleet.render.exposure import listen_address, publish_spec
from inferfleet.render.facts import HostFacts
from inferfleet.runtimes.base import Launch, gpu_devices
from inferfleet.runtimes.pinned import entry_args
from inferfleet.runtimes.registry import RuntimeTraits, traits

CACHE_MOUNT = "/cache"
TEMPLATE_MOUNT = "/etc/inferfleet/chat-template.jinja"
# The label of every container inferfleet renders: its service. The health gate finds
# the server through it (L-33); a stale container is removed by name and label (L-36).
CONTAINER_LABEL = "inferfleet.service"


@dataclass(frozen=True)
class Mount:
    host: str
    container: str
    read_only: bool

    def spec(self, relabel: bool = False) -> str:
        """podman's ``host:container[:options]``; ``relabel`` on a host that enforces SELinux:
        the shared container label (``z``), so every container of the host may use it."""
        return mount_spec(self.host, self.container, read_only=self.read_only, relabel=relabel)


def mount_spec(host: str, container: str, *, read_only: bool, relabel: bool) -> str:
    options = [o for o, on in (("ro", read_only), ("z", relabel)) if on]
    return f"{host}:{container}" + (f":{','.join(options)}" if options else "")


@dataclass(frozen=True)
class Resolved:
    """A service ready for the unit renderers."""

    name: str
    service: Service
    host_name: str
    host: Host
    facts: HostFacts
    runtime: Runtime | None
    traits: RuntimeTraits | None
    image: str | None  # set when the service runs in a container
    argv: list[str]  # the server's argv; for a container: what runs inside it
    mounts: list[Mount] = field(default_factory=list)
    container_env: dict[str, str] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)
    container_port: int | None = None
    publish: str | None = None  # ADDRESS:PORT:CONTAINER_PORT of a bridged container
    preset: tuple[str, str] | None = None  # a swap group's router presets: (install path, text)

    @property
    def unit(self) -> str:
        return paths.unit_name(self.name)

    @property
    def in_container(self) -> bool:
        return self.image is not None

    @property
    def env_file(self) -> str:
        """Where the service's env file is installed on the host."""
        scope = self.service.unit.scope
        return f"{self.facts.config_dir(scope)}/env/{self.name}.env"

    @property
    def stop_grace_s(self) -> float:
        return 10.0 if self.traits is None else self.traits.stop_grace_s


def resolve(
    fleet: Fleet,
    fleet_root: Path,
    name: str,
    facts: HostFacts,
    *,
    rpc_args: list[str] | None = None,
) -> Resolved:
    """``rpc_args``: the split of a service with RPC workers (:mod:`inferfleet.render.rpc`)."""
    if name in fleet.groups:
        from inferfleet.render.router import resolve_group  # it resolves members through here

        return resolve_group(fleet, fleet_root, name, facts)
    if name not in fleet.services:
        return _rpc_worker(fleet, name, facts)
    service = fleet.services[name]
    if service.rpc and rpc_args is None:
        from inferfleet.render.rpc import rpc_launch_args

        rpc_launch_args(fleet, name, None)  # refuses: a split service needs its split
    host = fleet.hosts[service.host]
    bind = listen_address(fleet, name)  # refuses a bind its exposure does not allow (L-58)
    if service.kind == "container":
        return _plain_container(name, service, host, facts, bind)
    assert service.runtime is not None and service.model is not None
    runtime = fleet.runtimes[service.runtime]
    kind = traits(runtime.kind)
    if runtime.image is not None:
        return _llm_container(fleet, fleet_root, name, service, host, facts, runtime, kind, bind)
    binary = paths.runtime_binary(runtime, facts)
    program = [binary, *entry_args(runtime.kind, runtime.source, binary)]
    draft = service.drafter
    launch = Launch(
        service_name=name,
        service=service,
        host=host,
        program=program,
        model_path=paths.model_path(fleet, fleet_root, service.model, facts),
        listen_host=bind,
        listen_port=service.port,
        draft_model_path=None
        if draft is None
        else paths.model_path(fleet, fleet_root, draft, facts),
        mmproj_path=None
        if service.mmproj is None
        else paths.projector_path(
            fleet,
            fleet_root,
            service.model,
            service.mmproj,
            paths.model_dir(fleet, service.model, facts),
        ),
        chat_template_path=None
        if service.chat_template_file is None
        else paths.fleet_relative(facts, service.chat_template_file),
        rpc_args=list(rpc_args or []),
    )
    return Resolved(
        name, service, service.host, host, facts, runtime, kind, None, kind.argv(launch)
    )


def _rpc_worker(fleet: Fleet, unit: str, facts: HostFacts) -> Resolved:
    """An RPC worker unit: ``ggml-rpc-server`` of the service's pinned build on its host."""
    from inferfleet.fleetfile.rpc import worker_service
    from inferfleet.render.rpc import worker_argv

    service = worker_service(fleet, unit)  # KeyError: no unit of this fleet
    runtime = fleet.runtimes[service.runtime or ""]
    return Resolved(
        unit,
        service,
        service.host,
        fleet.hosts[service.host],
        facts,
        runtime,
        traits(runtime.kind),
        None,
        worker_argv(fleet, unit, facts),
    )


def _llm_container(
    fleet: Fleet,
    fleet_root: Path,
    name: str,
    service: Service,
    host: Host,
    facts: HostFacts,
    runtime: Runtime,
    kind: RuntimeTraits,
    bind: str,
) -> Resolved:
    assert service.model is not None and runtime.image is not None
    mounts: list[Mount] = []

    def mount_model(model_name: str) -> str:
        inside = f"/models/{model_name}"
        mounts.append(Mount(paths.model_dir(fleet, model_name, facts), inside, True))
        main = paths.model_main(fleet, fleet_root, model_name)
        return inside if main is None else f"{inside}/{main}"

    model_path = mount_model(service.model)
    draft_path = None if service.drafter is None else mount_model(service.drafter)
    template_path = None
    if service.chat_template_file is not None:
        source = paths.fleet_relative(facts, service.chat_template_file)
        mounts.append(Mount(source, TEMPLATE_MOUNT, True))
        template_path = TEMPLATE_MOUNT
    mounts.append(Mount(paths.container_cache(name, service, facts), CACHE_MOUNT, False))
    mounts += [
        Mount(facts.expand(v.host), v.container, v.read_only) for v in service.container.volumes
    ]
    port = service.container.port or service.port
    host_network = service.container.network == "host"
    launch = Launch(
        service_name=name,
        service=service,
        host=host,
        program=list(kind.container_program),
        model_path=model_path,
        # Bridged: every address of the container's own namespace; the host side is the
        # published port, on the bind.
        listen_host=bind if host_network else "0.0.0.0",
        listen_port=service.port if host_network else port,
        draft_model_path=draft_path,
        mmproj_path=None
        if service.mmproj is None
        else paths.projector_path(
            fleet, fleet_root, service.model, service.mmproj, str(PurePosixPath(model_path).parent)
        ),
        chat_template_path=template_path,
        in_container=True,
    )
    env = llm_container_env(service, kind)
    argv = kind.argv(launch)
    return container(name, service, host, facts, runtime, kind, argv, mounts, env, bind)


def llm_container_env(service: Service, kind: RuntimeTraits) -> dict[str, str]:
    """The environment of an LLM server's container."""
    return {
        # L-39: a writable HOME on the cache mount; L-37: compile caches there too.
        "HOME": service.container.home or CACHE_MOUNT,
        # The files are fetched and verified by inferfleet; the server must not download.
        "HF_HUB_OFFLINE": "1",
        **kind.cache_env,
        **service.container.env,
    }


def _plain_container(
    name: str, service: Service, host: Host, facts: HostFacts, bind: str
) -> Resolved:
    mounts = [
        Mount(facts.expand(v.host), v.container, v.read_only) for v in service.container.volumes
    ]
    if service.container.cache is not None:
        mounts.append(Mount(paths.container_cache(name, service, facts), CACHE_MOUNT, False))
    env = dict(service.container.env)
    if service.container.home is not None:
        env["HOME"] = service.container.home
    return container(
        name, service, host, facts, None, None, list(service.extra_args), mounts, env, bind
    )


def container(
    name: str,
    service: Service,
    host: Host,
    facts: HostFacts,
    runtime: Runtime | None,
    kind: RuntimeTraits | None,
    argv: list[str],
    mounts: list[Mount],
    env: dict[str, str],
    bind: str,
) -> Resolved:
    """A container service: its image, devices and published port (none on host networking)."""
    image = runtime.image if runtime is not None else service.image
    published = (
        None if service.container.network == "host" else service.container.port or service.port
    )
    return Resolved(
        name,
        service,
        service.host,
        host,
        facts,
        runtime,
        kind,
        image,
        argv,
        mounts,
        env,
        _devices(service, host),
        published,
        None if published is None else publish_spec(bind, service.port, published),
    )


def _devices(service: Service, host: Host) -> list[str]:
    """Device nodes (AMD, Intel) or CDI names (NVIDIA) the container needs."""
    if service.container.devices is not None:
        return list(service.container.devices)
    found: list[str] = []
    for position, device in gpu_devices(service, host):
        if device.vendor == "nvidia":
            index = device.index if device.index is not None else position
            found.append(f"nvidia.com/gpu={index}")
        elif device.vendor == "amd":
            found += ["/dev/kfd", "/dev/dri"]
        elif device.vendor == "intel":
            found.append("/dev/dri")
    return list(dict.fromkeys(found))
