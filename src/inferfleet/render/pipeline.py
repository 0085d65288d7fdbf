"""The one launch pipeline: a service becomes what runs for it on its host.

``service_launch`` is the only place that turns a service into its launch:
the server argv, the environment it gets, the unit / Quadlet / env files
installed for it, the model files it needs, and one digest over all of it.
``up``, ``apply``, ``show``, ``render``, ``rollback`` and the bench arms all
take their launch from here, so two verbs can never disagree about whether
a running service is the one the fleet file asks for.

A pure function of the fleet (at the revision being applied) and the host's
facts: ``render`` writes the same bytes that ``apply`` installs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from inferfleet.artifacts.manifest import declared_files
from inferfleet.budget.fleet import ShapeOf
from inferfleet.budget.sizing import engine_devices
from inferfleet.budget.vllm_kv import GIB
from inferfleet.budget.vllm_service import KV_SPACE_ENV, launch_kv_space
from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet, Service
from inferfleet.fleetfile.groups import members, unit_service
from inferfleet.render.bundle import service_artifacts
from inferfleet.render.extra_args import refuse_launch_flags
from inferfleet.render.facts import HostFacts, unit_name
from inferfleet.render.launch import resolve
from inferfleet.render.launch_parts import (
    UNIT_KINDS,
    InstallFile,
    UnitParts,
    launch_digest,
    passed_from_caller,
)
from inferfleet.render.rpc import rpc_launch_args
from inferfleet.render.systemd import podman_run

# The version of the digest's definition: a record written under another one
# is restarted once rather than compared field by field.
DIGEST_VERSION = 2


@dataclass(frozen=True)
class ModelFileRef:
    """A declared model file the launch depends on (part of the digest)."""

    model: str
    path: str
    size: int
    sha256: str | None


@dataclass(frozen=True)
class ServiceLaunch(UnitParts):
    name: str
    host: str
    service: Service
    unit: str  # inferfleet-NAME: the unit, the container and the Quadlet file's name
    argv: list[str]  # the server's argv (process: what is spawned; container: what runs in it)
    env: dict[str, str]  # the fleet's tunables and runtime variables for the process
    files: list[InstallFile] = field(default_factory=list)  # systemd / quadlet backends
    models: list[str] = field(default_factory=list)  # model names whose files are gated
    model_files: list[ModelFileRef] = field(default_factory=list)
    image: str | None = None
    # Process backend in a container: the container's name (also the unit's name), and
    # the host folders of its writable mounts, made before the start (L-37).
    container: str | None = None
    make_dirs: list[str] = field(default_factory=list)

    @property
    def backend(self) -> str:
        return self.service.backend

    # Where it listens and answers health: the names a front door's launch has too
    # (:class:`inferfleet.render.frontdoor.FrontLaunch`), so one executor runs both.
    @property
    def bind(self) -> str:
        return self.service.bind

    @property
    def port(self) -> int:
        return self.service.port

    @property
    def health_path(self) -> str:
        return self.service.health.path

    @property
    def health_timeout(self) -> float:
        return self.service.health.timeout

    @property
    def health_url(self) -> str:
        return self.service.url(self.service.health.path)

    @property
    def marked(self) -> bool:
        """Its deploy ends with a marker of the revision (L-41)."""
        return True

    @property
    def scope(self) -> str:
        return self.service.unit.scope

    @property
    def spec(self) -> str:
        """The one digest of everything that defines the running service."""
        models = sorted((m.model, m.path, m.size, m.sha256 or "") for m in self.model_files)
        return launch_digest(
            DIGEST_VERSION, self.argv, self.env, self.files, self.health_path, models=models
        )

    def process_env(
        self, base: Mapping[str, str], secrets: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The environment a process-backend server starts with: a minimal one.

        From the caller only what any program needs to run and format text
        (:data:`PASSED_ENV`: ``PATH``, ``HOME``, ``LANG``, ``LC_*``, ``TZ``),
        then the values of the service's ``secrets_env`` file (``secrets``,
        read by the caller), then the fleet's own tunables and runtime
        variables. Never the rest of the caller's environment: an
        ``HF_TOKEN`` or cloud key in an operator's shell is not the server's
        to read (in ``/proc/<pid>/environ``), and a stray
        ``LLAMA_ARG_*`` would silently change a served config (llama-server
        takes every flag from one).
        """
        env = {k: v for k, v in base.items() if passed_from_caller(k)}
        if self.container is not None:
            # podman's own settings (storage, runtime, the rootless runtime dir).
            env.update({k: v for k, v in base.items() if k.startswith(PODMAN_ENV)})
        env.update(secrets or {})
        env.update(self.env)
        return env


# What podman itself reads, passed to a process-backend container's podman only.
PODMAN_ENV = ("CONTAINERS_", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME")


def service_launch(
    fleet: Fleet,
    root: Path,
    name: str,
    facts: HostFacts,
    *,
    shape_of: ShapeOf | None = None,
) -> ServiceLaunch:
    """The launch of service ``name``; ``root`` is the fleet file's folder here.

    ``shape_of`` reads a model's header: a service split over RPC workers
    needs its layers to put the split in its argv (:func:`rpc_launch_args`).
    """
    service = unit_service(fleet, name)
    refuse_launch_flags(fleet, name)
    rpc_args = rpc_launch_args(fleet, name, shape_of) if service.rpc else None
    fleet = with_cpu_kv_space(fleet, root, name)
    service = unit_service(fleet, name)
    resolved = resolve(fleet, root, name, facts, rpc_args=rpc_args)
    models = served_models(fleet, name)
    model_files = [
        ModelFileRef(m, f.path, f.size, f.sha256)
        for m in models
        for f in declared_files(fleet.models[m], root)
    ]
    files: list[InstallFile] = []
    if service.backend in UNIT_KINDS:
        for artifact in service_artifacts(resolved):
            if artifact.install is not None:
                files.append(InstallFile(artifact.install, artifact.content, artifact.kind))
    elif resolved.preset is not None:
        # A swap group's router reads its presets whatever runs it.
        files.append(InstallFile(*resolved.preset, "preset"))
    process = service.backend == "process"
    # resolved.service: a group's router adds its own runtime variables (render/router.py).
    env = {**resolved.service.runtime_env, **resolved.service.env} if process else {}
    argv = list(resolved.argv)
    container = None
    if process and resolved.in_container:
        # Run by podman in the foreground: the recorded pid is podman's, the log is the
        # container's output, and the values reach the container by name (L-06).
        secrets = None
        if service.secrets_env is not None:
            secrets = facts.expand(service.secrets_env)
        argv = podman_run(resolved, env_file=secrets, env_names=sorted(env), process=True)
        container = resolved.unit
    return ServiceLaunch(
        name=name,
        host=service.host,
        service=service,
        unit=unit_name(name),
        argv=argv,
        env=env,
        files=files,
        models=models,
        model_files=model_files,
        image=resolved.image,
        container=container,
        make_dirs=[m.host for m in resolved.mounts if not m.read_only] if container else [],
    )


def with_cpu_kv_space(fleet: Fleet, root: Path, name: str) -> Fleet:
    """The fleet with a vLLM-on-CPU service's ``VLLM_CPU_KVCACHE_SPACE`` set to what the
    budget prices; left alone, vLLM takes a share of the host's whole RAM, whatever
    memory the fleet declares (:func:`inferfleet.budget.vllm_service.launch_kv_space`)."""
    service = fleet.services.get(name)
    runtime = None if service is None else fleet.runtimes.get(service.runtime or "")
    if service is None or runtime is None or runtime.kind != "vllm" or service.model is None:
        return fleet
    host = fleet.hosts[service.host]
    weights = sum(
        entry.size
        for entry in declared_files(fleet.models[service.model], root)
        if entry.path.endswith(".safetensors")
    )
    space = launch_kv_space(name, service, host, engine_devices(service, host), weights)
    if space is None:
        return fleet
    if space < GIB:
        raise UsageError(
            f"service {name!r}: vLLM on CPU would have less than 1 GiB for its KV cache: the "
            f"declared memory, less the weights ({weights / GIB:.2f} GiB) and ~1 GiB of "
            "runtime, leaves no whole GiB (VLLM_CPU_KVCACHE_SPACE is whole GiB)",
            where=f"hosts.{service.host}",
            hint="declare more memory for the host (its cpu device or ram), or set "
            "runtime_env.VLLM_CPU_KVCACHE_SPACE yourself",
        )
    env = {**service.runtime_env, KV_SPACE_ENV: str(space // GIB)}
    updated = service.model_copy(update={"runtime_env": env})
    return fleet.model_copy(update={"services": {**fleet.services, name: updated}})


def served_models(fleet: Fleet, name: str) -> list[str]:
    """The models (and drafters) a unit loads: its own, or every member's of a group;
    none for an RPC worker (the server sends it the tensors)."""
    if name not in fleet.groups and name not in fleet.services:
        return []
    services = list(members(fleet, name).values()) if name in fleet.groups else []
    services = services or [fleet.services[name]]
    found: list[str] = []
    for service in services:
        found += [model for model in service.models_loaded if model not in found]
    return found
