"""Facts a host reports about itself: who and where it is, and what runs for each service.

Facts are read, never changed. An apply reads them right before it decides
what to do; ``deploy --dry-run`` and ``plan`` read the same facts over ssh
(``inferfleet apply --facts``) and decide on the operator's machine with the
same pure functions.
"""

from __future__ import annotations

import getpass
import shutil
from collections.abc import Iterable
from pathlib import Path

from inferfleet import paths
from inferfleet.backends import health as gate
from inferfleet.backends import quadlet
from inferfleet.backends.ports import owned_by
from inferfleet.backends.process import ProcessBackend, alive
from inferfleet.backends.systemd import Systemctl, file_sha256
from inferfleet.deploy.markers import Marker

# Re-exported: the status board reads states from here.
from inferfleet.deploy.state import ServiceState as ServiceState
from inferfleet.io import http
from inferfleet.render.facts import HostFacts, unit_name

PROBE_TIMEOUT = 2.0


def host_facts() -> HostFacts:
    """This machine's user, home and cache, which the rendered paths are made of."""
    return HostFacts(
        user=getpass.getuser(),
        home=str(Path.home()),
        cache_dir=str(paths.cache_dir()),
        podman=shutil.which("podman") or HostFacts.podman,
        mkdir=shutil.which("mkdir") or HostFacts.mkdir,
    )


def unit_paths(name: str, facts: HostFacts) -> dict[str, list[str]]:
    """Where a service's unit, Quadlet and env files go, per scope (as the renderer puts them)."""
    unit = unit_name(name)
    return {
        scope: [
            f"/etc/systemd/system/{unit}.service"
            if scope == "system"
            else f"{facts.home}/.config/systemd/user/{unit}.service",
            f"{quadlet.quadlet_dir(scope, facts.home)}/{unit}.container",
            f"{facts.config_dir(scope)}/env/{name}.env",
        ]
        for scope in ("system", "user")
    }


def service_state(
    name: str,
    facts: HostFacts,
    state_dir: Path,
    marker: Marker | None,
    *,
    extra_paths: Iterable[str] = (),
) -> ServiceState:
    files: dict[str, str] = {}
    scopes_with_files: set[str] = set()
    for scope, candidates in unit_paths(name, facts).items():
        for candidate in candidates:
            digest = file_sha256(Path(candidate))
            if digest is not None:
                files[candidate] = digest
                if not candidate.endswith(".env"):
                    scopes_with_files.add(scope)
    for extra in extra_paths:
        digest = file_sha256(Path(extra))
        if digest is not None:
            files[extra] = digest

    pid: int | None = None
    process_spec: str | None = None
    where: tuple[str, int, str] | None = None
    record = ProcessBackend(state_dir).records.read(name)
    if record is not None and alive(record) is not None:
        pid, process_spec = record.pid, record.spec_hash
        where = (record.bind, record.port, record.health_path)

    units: dict[str, str] = {}
    if scopes_with_files and shutil.which("systemctl"):
        service_unit = f"{unit_name(name)}.service"
        for scope in sorted(scopes_with_files):
            state = Systemctl(scope).show(service_unit)
            units[f"{scope}:{service_unit}"] = f"{state.active}/{state.sub}"
            if state.running and pid is None:
                pid = state.main_pid
                if marker is not None:
                    where = (marker.bind, marker.port, marker.health_path)

    healthy = False
    if pid is not None and where is not None:
        bind, port, health_path = where
        with http.client(timeout=PROBE_TIMEOUT) as client:
            probe = gate.probe(client, gate.url_for(bind, port, health_path))
        healthy = probe.state == "ok" and owned_by(port, bind, pid)
    return ServiceState(name, pid, process_spec, units, files, healthy)
