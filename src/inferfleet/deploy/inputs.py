"""What a service's deploy depends on, at one revision: its inputs (L-40).

A service's inputs are its own section of the fleet file, the runtime and
model entries it uses (with the host devices it runs on), and the repository
files it renders from or declares as its own: model manifests, the chat
template, settings templates and its ``paths``. Nothing else selects it, so a
README edit deploys nothing and one model's manifest redeploys only the
services that serve it.

Sections are compared by the digest of their canonical JSON (defaults left
out, so spelling out a default changes nothing); files by their git blob id.
Both are pure functions of the fleet and one ``git ls-tree``.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from inferfleet.deploy.repofiles import MISSING, RepoFiles
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.groups import deploy_units, members, unit_service
from inferfleet.fleetfile.rpc import RpcWorker, worker_of

INPUTS_VERSION = 1


@dataclass(frozen=True)
class ServiceInputs:
    sections: dict[str, str]  # "service", "runtime:NAME", "model:NAME", "devices" -> digest
    files: dict[str, str]  # repository path -> blob id (MISSING when declared but absent)
    version: int = INPUTS_VERSION

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "sections": self.sections, "files": self.files}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServiceInputs:
        return cls(
            sections={str(k): str(v) for k, v in dict(data.get("sections", {})).items()},
            files={str(k): str(v) for k, v in dict(data.get("files", {})).items()},
            version=int(data.get("version", 0)),
        )

    def changes_since(self, old: ServiceInputs) -> list[str]:
        """Why this differs from ``old``, one short reason per changed input."""
        reasons: list[str] = []
        for key in sorted(set(self.sections) | set(old.sections)):
            if self.sections.get(key) != old.sections.get(key):
                reasons.append(_section_reason(key, key in old.sections, key in self.sections))
        for path in sorted(set(self.files) | set(old.files)):
            before, after = old.files.get(path), self.files.get(path)
            if before == after:
                continue
            if before in (None, MISSING):
                reasons.append(f"file {path} added")
            elif after in (None, MISSING):
                reasons.append(f"file {path} removed")
            else:
                reasons.append(f"file {path} changed")
        return reasons


def _section_reason(key: str, was: bool, now: bool) -> str:
    kind, _, name = key.partition(":")
    what = f"{kind} {name!r}" if name else ("its section" if kind == "service" else kind)
    if not was:
        return f"now uses {what}"
    if not now:
        return f"no longer uses {what}"
    return f"{what} changed" if name else f"{what} of the fleet file changed"


def digest(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _dump(model: BaseModel) -> Any:
    return model.model_dump(mode="json", exclude_defaults=True)


def service_inputs(fleet: Fleet, fleet_path: str, name: str, files: RepoFiles) -> ServiceInputs:
    """The inputs of service ``name``; ``fleet_path`` is the fleet file's repository path.

    A swap group's inputs are its settings and every member's inputs.
    """
    if name in fleet.groups:
        sections = {"group": digest(_dump(fleet.groups[name]))}
        for member in members(fleet, name):
            inputs = service_inputs(fleet, fleet_path, member, files)
            sections.update({f"{key}@{member}": v for key, v in inputs.sections.items()})
        declared, patterns = file_inputs(fleet, fleet_path, name)
        return ServiceInputs(sections=sections, files=files.inputs(declared, patterns))
    found = worker_of(fleet, name)
    if found is not None:
        return _worker_inputs(fleet, *found, files)
    service = fleet.services[name]
    sections = {"service": digest(_dump(service))}
    if service.runtime is not None and service.runtime in fleet.runtimes:
        sections[f"runtime:{service.runtime}"] = digest(_dump(fleet.runtimes[service.runtime]))
    for model_name in _used_models(fleet, name):
        sections[f"model:{model_name}"] = digest(_dump(fleet.models[model_name]))
    host = fleet.hosts.get(service.host)
    if host is not None:
        wanted = set(service.devices)
        if service.speculative is not None and service.speculative.draft_device is not None:
            wanted.add(service.speculative.draft_device)
        # Position matters: it is the runtime's device index unless one is given.
        used = [[i, _dump(d)] for i, d in enumerate(host.devices) if d.name in wanted]
        if used:
            sections["devices"] = digest(used)
    if service.rpc:  # the split follows the workers' devices (their memory)
        sections["rpc-devices"] = digest([_worker_device(fleet, w) for w in service.rpc])
    declared, patterns = file_inputs(fleet, fleet_path, name)
    return ServiceInputs(sections=sections, files=files.inputs(declared, patterns))


def _worker_device(fleet: Fleet, worker: RpcWorker) -> Any:
    host = fleet.hosts.get(worker.host)
    found = [] if host is None else [d for d in host.devices if d.name == worker.device]
    return [worker.host, *(_dump(d) for d in found)]


def _worker_inputs(
    fleet: Fleet, service: str, worker: RpcWorker, files: RepoFiles
) -> ServiceInputs:
    """An RPC worker depends on its entry, its service's runtime and its device."""
    runtime = fleet.services[service].runtime or ""
    sections = {
        "rpc-worker": digest(_dump(worker)),
        "devices": digest(_worker_device(fleet, worker)),
    }
    if runtime in fleet.runtimes:
        sections[f"runtime:{runtime}"] = digest(_dump(fleet.runtimes[runtime]))
    return ServiceInputs(sections=sections, files=files.inputs([], []))


def _used_models(fleet: Fleet, name: str) -> list[str]:
    return [m for m in fleet.services[name].models_loaded if m in fleet.models]


def file_inputs(fleet: Fleet, fleet_path: str, name: str) -> tuple[list[str], list[str]]:
    """The repository files service ``name`` depends on: the paths it declares (model
    manifests, chat template, settings templates) and its ``paths`` patterns."""
    if name in fleet.groups:
        found = [file_inputs(fleet, fleet_path, member) for member in members(fleet, name)]
        named = dict.fromkeys(path for paths, _ in found for path in paths)
        matched = dict.fromkeys(pattern for _, patterns in found for pattern in patterns)
        return list(named), list(matched)
    if worker_of(fleet, name) is not None:
        return [], []  # an RPC worker reads no file of the repository
    service = fleet.services[name]
    base = posixpath.dirname(fleet_path)

    def in_repo(relative: str) -> str:
        return posixpath.normpath(posixpath.join(base, relative))

    declared = [
        in_repo(manifest)
        for manifest in (fleet.models[m].manifest for m in _used_models(fleet, name))
        if manifest is not None
    ]
    if service.chat_template_file is not None:
        declared.append(in_repo(service.chat_template_file))
    declared += [in_repo(s.template) for s in service.settings]
    return declared, list(service.paths)


@dataclass(frozen=True)
class FleetAtRevision:
    """A fleet as committed at one revision, with the inputs of all its services."""

    revision: str
    fleet: Fleet
    fleet_path: str  # repository path of the fleet file
    inputs: dict[str, ServiceInputs] = field(default_factory=dict)
    blobs: Mapping[str, str] = field(default_factory=dict)  # the revision's files -> blob ids

    def services_of(self, host: str) -> list[str]:
        """The host's services, in fleet file order (the order they deploy in)."""
        fleet = self.fleet
        return [n for n in deploy_units(fleet) if unit_service(fleet, n).host == host]

    def host_files(self, host: str) -> tuple[list[str], list[str]]:
        """The files the host's services declare and their ``paths`` patterns, once each."""
        declared: dict[str, None] = {}
        patterns: dict[str, None] = {}
        for name in self.services_of(host):
            named, matched = file_inputs(self.fleet, self.fleet_path, name)
            declared.update(dict.fromkeys(named))
            patterns.update(dict.fromkeys(matched))
        return list(declared), list(patterns)


def fleet_inputs(
    fleet: Fleet, fleet_path: str, blobs: Mapping[str, str]
) -> dict[str, ServiceInputs]:
    files = RepoFiles(blobs)
    return {name: service_inputs(fleet, fleet_path, name, files) for name in deploy_units(fleet)}
