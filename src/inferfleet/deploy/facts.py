"""Facts a host reports about itself: who and where it is, and what runs for each service.

Facts are read, never changed. An apply reads them right before it decides
what to do; ``deploy --dry-run`` and ``plan`` read the same facts over ssh
(``inferfleet apply --facts``) and decide on the operator's machine with the
same pure functions.
"""

from __future__ import annotations

import getpass
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import psutil

from inferfleet import paths
from inferfleet.backends import health as gate
from inferfleet.backends import podman, quadlet
from inferfleet.backends.ports import family_of, listeners
from inferfleet.backends.process import ProcessBackend, alive, owner_pids
from inferfleet.backends.systemd import Systemctl, file_sha256
from inferfleet.deploy.markers import Marker
from inferfleet.deploy.state import (
    HealthFact,
    RecordFact,
    ServiceFacts,
    UnitFact,
)
from inferfleet.fleetfile.exposure import url_for
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.io.become import NO_BECOME, Become, for_scope
from inferfleet.render.facts import HostFacts, unit_name

PROBE_TIMEOUT = 2.0


def host_facts(fleet_dir: Path | None = None) -> HostFacts:
    """This machine's user, home and cache, which the rendered paths are made of.

    ``fleet_dir`` is the fleet file's folder here (paths in the fleet file are
    relative to it); without it, the launch cannot name the fleet's own files.
    """
    return HostFacts(
        user=getpass.getuser(),
        home=str(Path.home()),
        cache_dir=str(paths.cache_dir()),
        podman=shutil.which("podman") or HostFacts.podman,
        mkdir=shutil.which("mkdir") or HostFacts.mkdir,
        fleet_dir="" if fleet_dir is None else str(fleet_dir),
        uid=str(os.getuid()),
        gid=str(os.getgid()),
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


Endpoint = tuple[str, int, str]  # bind, port, health path


def system_become(fleet: Fleet, host: str) -> Become:
    """How facts of the host's system scope are read as root (its ``become``): a rootful
    container is inspected, and its socket named, through sudo (L-33)."""
    spec = fleet.hosts.get(host)
    return for_scope(host, None if spec is None else spec.become, "system")


def gather(
    name: str,
    facts: HostFacts,
    state_dir: Path,
    marker: Marker | None,
    *,
    extra_paths: Iterable[str] = (),
    endpoint: Endpoint | None = None,
    settings: Mapping[str, str] | None = None,
    become: Become = NO_BECOME,
    tls: gate.TlsTarget | None = None,
) -> ServiceFacts:
    """Read (never change) everything :func:`decide` needs about one service.

    ``become``: how the host's system scope is read as root (:func:`system_become`):
    a system unit's container is root's, invisible to a deployer that is not.

    ``settings`` are the service's settings files as rendered on this host
    (dest -> sha256 of the rendered content, L-54): each dest is read like
    the launch's files, so the installed digest sits next to the rendered one.

    ``tls``: the health route is HTTPS, trusted as the target says (the auth proxy).

    Where to probe: the running process's own record first, then the marker
    of the unit that runs it, then ``endpoint`` (the fleet file's, so a
    stopped service still shows a stranger on its port).
    """
    files: dict[str, str] = {}
    scopes_with_files: set[str] = set()
    # Where the renderer installs this service's files, per scope, and the files the
    # launch names besides (extra_paths): one stat + hash each, when present.
    candidates: list[tuple[str | None, str]] = [
        (s, c) for s, paths in unit_paths(name, facts).items() for c in paths
    ]
    candidates += [(None, extra) for extra in extra_paths]
    candidates += [(None, dest) for dest in sorted(settings or {})]
    for scope, candidate in candidates:
        digest = file_sha256(Path(candidate))
        if digest is None:
            continue
        files[candidate] = digest
        if scope is not None and not candidate.endswith(".env"):
            scopes_with_files.add(scope)

    record_fact: RecordFact | None = None
    pid: int | None = None
    container: set[int] = set()  # a containerised server's processes (L-33)
    where = endpoint
    record = ProcessBackend(state_dir).records.read(name)
    if record is not None:
        proc = alive(record)
        record_fact = RecordFact(
            pid=record.pid,
            same_process=proc is not None,
            now_running="" if proc is not None else _program_of(record.pid),
            spec=record.spec_hash,
            bind=record.bind,
            port=record.port,
            health_path=record.health_path,
            started_at=record.started_at,
            runtime_version=record.runtime_version,
            starting=record.healthy_after_s is None,
        )
        if proc is not None:
            pid = proc.pid
            where = (record.bind, record.port, record.health_path)
            container = owner_pids(record)

    units: dict[str, UnitFact] = {}
    reveal = NO_BECOME  # how a socket whose owner is not visible is named (L-33)
    if scopes_with_files and shutil.which("systemctl"):
        service_unit = f"{unit_name(name)}.service"
        for scope in sorted(scopes_with_files):
            shown = Systemctl(scope).show(service_unit)
            units[f"{scope}:{service_unit}"] = UnitFact(
                shown.active, shown.sub, shown.main_pid, shown.restarts
            )
            if shown.running and pid is None:
                pid = shown.main_pid
                if marker is not None:
                    where = (marker.bind, marker.port, marker.health_path)
                if podman.present(facts.podman):
                    # A unit's container: its server is conmon's child, not MainPID's (L-33).
                    root = become if scope == "system" else NO_BECOME
                    container = podman.owner_pids(facts.podman, unit_name(name), name, root)
                    reveal = root

    health: HealthFact | None = None
    if where is not None:
        bind, port, health_path = where
        held = listeners(port, bind, become=reveal)
        family = (family_of(pid) | container) if pid is not None else set()
        strangers = [h for h in held if h.pid not in family]
        answer, status = "down", None
        url = url_for(bind, port, health_path, scheme="http" if tls is None else "https")
        if pid is not None or held:
            if tls is not None:
                probe = gate.probe_tls(url, tls, timeout=PROBE_TIMEOUT)
            else:
                from inferfleet.io import http  # only when something may answer

                with http.client(timeout=PROBE_TIMEOUT, plain_http=True) as client:
                    probe = gate.probe(client, url)
            answer, status = probe.state, probe.status
        health = HealthFact(
            url=url,
            answer=answer,
            status=status,
            listeners=[h.pid for h in held if h.pid is not None],
            owned=bool(held) and not strangers and pid is not None,
            holder=strangers[0].describe() if strangers else "",
        )
    return ServiceFacts(name, record_fact, units, files, health, dict(settings or {}))


def _program_of(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return ""
