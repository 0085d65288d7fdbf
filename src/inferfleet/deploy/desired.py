"""What should run for a service on its host: argv, installed files and a spec digest.

A pure function of the fleet (at the revision being applied) and the host's
facts. The unit and Quadlet texts come from the renderer (``inferfleet
render`` writes the same bytes); the process backend runs the rendered argv.
The spec digest names all of it, so an apply can tell a service that already
runs exactly this from one that must be restarted.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet, Service
from inferfleet.render.bundle import service_artifacts
from inferfleet.render.facts import HostFacts, unit_name
from inferfleet.render.launch import resolve

UNIT_KINDS = {"systemd", "quadlet"}


@dataclass(frozen=True)
class InstallFile:
    path: str  # absolute path on the host
    content: str
    kind: str  # env | systemd | quadlet

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content.encode()).hexdigest()


@dataclass(frozen=True)
class Desired:
    name: str
    host: str
    service: Service
    unit: str  # inferfleet-NAME: the unit, the container and the Quadlet file's name
    argv: list[str]  # what the process backend runs (empty for container services)
    env: dict[str, str]  # tunables and runtime variables the process gets
    files: list[InstallFile] = field(default_factory=list)  # systemd / quadlet backends
    models: list[str] = field(default_factory=list)  # model names whose files are gated
    image: str | None = None

    @property
    def backend(self) -> str:
        return self.service.backend

    @property
    def scope(self) -> str:
        return self.service.unit.scope

    @property
    def service_unit(self) -> str:
        """The systemd unit that runs it (Quadlet generates ``NAME.service`` from the file)."""
        return f"{self.unit}.service"

    @property
    def unit_file(self) -> InstallFile | None:
        return next((f for f in self.files if f.kind in UNIT_KINDS), None)

    @property
    def spec(self) -> str:
        """Digest of everything that defines the running service."""
        data = {
            "argv": self.argv,
            "env": self.env,
            "files": sorted((f.path, f.sha256) for f in self.files),
            "health": self.service.health.path,
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def desired_state(fleet: Fleet, root: Path, name: str, facts: HostFacts) -> Desired:
    service = fleet.services[name]
    if service.backend == "process":
        _process_only_llm(name, service, fleet)
    resolved = resolve(fleet, root, name, facts)
    models = [m for m in (service.model,) if m is not None]
    if service.speculative is not None and service.speculative.draft_model is not None:
        models.append(service.speculative.draft_model)
    files: list[InstallFile] = []
    if service.backend in UNIT_KINDS:
        for artifact in service_artifacts(resolved):
            if artifact.install is not None:
                files.append(InstallFile(artifact.install, artifact.content, artifact.kind))
    env = {**service.runtime_env, **service.env}
    return Desired(
        name=name,
        host=service.host,
        service=service,
        unit=unit_name(name),
        argv=list(resolved.argv) if service.backend == "process" else [],
        env=env if service.backend == "process" else {},
        files=files,
        models=models,
        image=resolved.image,
    )


def _process_only_llm(name: str, service: Service, fleet: Fleet) -> None:
    runtime = fleet.runtimes.get(service.runtime or "")
    if service.kind != "llm" or runtime is None or runtime.image is not None:
        raise UsageError(
            f"service {name!r} cannot run with the process backend "
            f"({'a container' if service.kind == 'container' else 'a container image runtime'})",
            hint="give it `backend: quadlet` (or systemd), which run containers",
        )
