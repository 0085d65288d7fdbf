"""Host facts the renderers need, and the paths on a host derived from them.

Renderers never probe a host (style rule 4): the user, home and cache dir of
a host are facts passed in. By default they are derived from the fleet file
alone (the ssh user, ``/home/<user>``), so rendering is a pure function of
the fleet and byte-stable; ``--facts FILE`` overrides them per host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from inferfleet.artifacts.locate import declared_file, main_file, model_dir_on
from inferfleet.artifacts.manifest import declared_files
from inferfleet.bounded import read_bounded_text
from inferfleet.errors import SpecError
from inferfleet.fleetfile.fleet import Fleet, Host, Runtime, Service
from inferfleet.runtimes.pinned import server_relpath

DEFAULT_USER = "inferfleet"
SYSTEM_CONFIG_DIR = "/etc/inferfleet"


@dataclass(frozen=True)
class HostFacts:
    user: str
    home: str
    cache_dir: str  # the host's inferfleet cache: runtimes, models, container caches
    podman: str = "/usr/bin/podman"
    mkdir: str = "/usr/bin/mkdir"
    # The fleet file's folder on the host. Paths in the fleet file (templates,
    # settings, manifests) are relative to it, everywhere (render, check, apply).
    fleet_dir: str = ""
    # The deploying user's numeric ids ("1000"), read on the host by the deploy; "" where
    # not known (rendered from the fleet file alone). A rootful container that writes what
    # that user must read runs as them.
    uid: str = ""
    gid: str = ""

    def expand(self, path: str) -> str:
        """``~/x`` -> ``<home>/x``: units need absolute paths."""
        if path == "~":
            return self.home
        if path.startswith("~/"):
            return f"{self.home}/{path[2:]}"
        return path

    def config_dir(self, scope: str) -> str:
        """Where rendered env files are installed for a unit of this scope."""
        return SYSTEM_CONFIG_DIR if scope == "system" else f"{self.home}/.config/inferfleet"


def default_facts(host: Host, fleet_subdir: str = "") -> HostFacts:
    """Facts derived from the fleet file alone; ``fleet_subdir`` is the fleet file's
    folder relative to the repository root (the host's ``checkout``)."""
    user = host.ssh.user or DEFAULT_USER
    home = "/root" if user == "root" else f"/home/{user}"
    facts = HostFacts(user=user, home=home, cache_dir=f"{home}/.cache/inferfleet")
    checkout = facts.expand(host.checkout).rstrip("/")
    fleet_dir = f"{checkout}/{fleet_subdir.strip('/')}" if fleet_subdir.strip("/") else checkout
    return replace(facts, fleet_dir=fleet_dir)


# What a host's facts may override, in the order --facts help and errors name them.
FACT_KEYS = ("user", "home", "cache_dir", "podman", "mkdir", "fleet_dir", "uid", "gid")
MAX_FACTS_BYTES = 1 << 20  # a few keys per host


def _facts_error(message: str, *, where: str, hint: str = "") -> SpecError:
    return SpecError(message, path=where, hint=hint)


def load_facts(path: Path, fleet: Fleet, fleet_subdir: str = "") -> dict[str, HostFacts]:
    """Per-host overrides from a YAML file: ``{host: {user, home, cache_dir}}``."""
    text = read_bounded_text(path, MAX_FACTS_BYTES, what="host facts", error=_facts_error)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"host facts are not valid YAML: {exc}", path=path) from None
    if not isinstance(data, dict):
        raise SpecError("host facts must map host names to facts", path=path)
    facts = facts_for(fleet, fleet_subdir=fleet_subdir)
    for name, values in data.items():
        if name not in fleet.hosts:
            raise SpecError(
                f"host facts name host {name!r}, which is not in the fleet",
                path=path,
                hint=f"known hosts: {', '.join(sorted(fleet.hosts))}",
            )
        if not isinstance(values, dict) or not set(values) <= set(FACT_KEYS):
            raise SpecError(
                f"facts of host {name!r} must be a mapping of {', '.join(FACT_KEYS)}",
                path=path,
            )
        facts[name] = replace(facts[name], **{k: str(v) for k, v in values.items()})
    return facts


def facts_for(
    fleet: Fleet, overrides: Mapping[str, HostFacts] | None = None, *, fleet_subdir: str = ""
) -> dict[str, HostFacts]:
    facts = {name: default_facts(host, fleet_subdir) for name, host in fleet.hosts.items()}
    facts.update(overrides or {})
    return facts


# ---------------------------------------------------------------- paths on a host


def model_dir(fleet: Fleet, model_name: str, facts: HostFacts) -> str:
    """The model's directory on the host (the one rule of artifacts.locate)."""
    model = fleet.models[model_name]
    return model_dir_on(model_name, model, home=facts.home, cache_dir=facts.cache_dir)


def model_main(fleet: Fleet, fleet_root: Path, model_name: str) -> str | None:
    """The file a GGUF loader opens (part 1 of a split, L-04); None for a directory model."""
    model = fleet.models[model_name]
    return main_file(model, declared_files(model, fleet_root), name=model_name)


def projector_path(
    fleet: Fleet, fleet_root: Path, model_name: str, mmproj: str, folder: str
) -> str:
    """``folder/mmproj``, once mmproj is known to be a declared file of the model (L-09, L-22)."""
    model = fleet.models[model_name]
    files = declared_files(model, fleet_root)
    return f"{folder}/{declared_file(model_name, model, files, mmproj, 'projector (mmproj)')}"


def model_path(fleet: Fleet, fleet_root: Path, model_name: str, facts: HostFacts) -> str:
    folder = model_dir(fleet, model_name, facts)
    main = model_main(fleet, fleet_root, model_name)
    return folder if main is None else f"{folder}/{main}"


def runtime_binary(runtime: Runtime, facts: HostFacts) -> str:
    """Where the server binary is on the host (pinned by source: in the host's cache; for a
    pinned Python package, its venv's Python)."""
    if runtime.binary is not None:
        return facts.expand(runtime.binary)
    if runtime.source is not None:
        return f"{facts.cache_dir}/{server_relpath(runtime.kind, runtime.source)}"
    raise SpecError("a container runtime has no binary on the host")


def fleet_relative(facts: HostFacts, relative: str) -> str:
    """A path the fleet file names, on the host: relative to the fleet file's folder."""
    if relative.startswith(("/", "~")):
        return facts.expand(relative)
    base = facts.fleet_dir.rstrip("/")
    clean = relative[2:] if relative.startswith("./") else relative
    return f"{base}/{clean}" if base else clean


def container_cache(service_name: str, service: Service, facts: HostFacts) -> str:
    if service.container.cache is not None:
        return facts.expand(service.container.cache)
    return f"{facts.cache_dir}/containers/{service_name}"


def unit_name(service_name: str) -> str:
    return f"inferfleet-{service_name}"
