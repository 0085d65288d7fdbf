"""Podman Quadlet ``.container`` files that run llama-server, read into services (backend quadlet).

Read with the systemd unit syntax (:func:`inferfleet.importers.systemd.parse_unit`);
the ``[Container]`` keys that describe the server (podman-systemd.unit(5):
``Image``, ``Entrypoint``, ``Exec``, ``Environment``, ``EnvironmentFile``,
``Volume``, ``PublishPort``, ``AddDevice``, ``User``, ``Network``) become the
service (:mod:`inferfleet.importers.container`); every other key is listed
as not imported, with its line.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from inferfleet.fleetfile.fleet import Host
from inferfleet.importers.container import (
    ContainerSpec,
    parse_publish,
    parse_volume,
    read_container,
    take_entry,
)
from inferfleet.importers.result import Imported, Where
from inferfleet.importers.systemd import (
    environment,
    exec_words,
    note_unread,
    parse_unit,
    read_unit_text,
    service_name,
)

_READ = {"Image", "Entrypoint", "Exec", "Environment", "EnvironmentFile", "Volume",
         "PublishPort", "AddDevice", "User", "Network", "ContainerName", "ShmSize"}  # fmt: skip


def read_quadlets(paths: list[Path], host_name: str, host: Host | None) -> Imported:
    out = Imported(host=host_name)
    for path in paths:
        _one(path, host_name, host, out)
    return out


def _one(path: Path, host_name: str, host: Host | None, out: Imported) -> None:
    entries = parse_unit(read_unit_text(path))
    box = [e for e in entries if e.section == "Container"]
    last = {e.key: e for e in box}
    if "Image" not in last:
        out.problem(Where(str(path), None), "no [Container] Image=: not a Quadlet container")
        return
    where = Where(str(path), last["Exec"].line if "Exec" in last else last["Image"].line)
    args: list[str] = []
    if "Exec" in last:
        words = exec_words(last["Exec"].value, [], where, out, key="Exec", prefixes=False)
        if words is None:
            return
        args = words
    entrypoint = None
    if "Entrypoint" in last:
        entrypoint = shlex.split(last["Entrypoint"].value)
    spec = ContainerSpec(
        name=service_name(path),
        where=where,
        image=last["Image"].value,
        args=args,
        entrypoint=entrypoint,
        env=environment(box, "Environment", path, out),
        user=last["User"].value if "User" in last else None,
        host_network="Network" in last and last["Network"].value == "host",
        shm_size=last["ShmSize"].value if "ShmSize" in last else None,
    )
    files = [e for e in box if e.key == "EnvironmentFile"]
    if files:
        spec.env_file = files[-1].value
    for entry in box:
        at = Where(str(path), entry.line)
        if entry.key == "Volume":
            why = f"Volume={entry.value}: a named volume has no equivalent"
            take_entry(parse_volume(entry.value), spec.volumes, out.note, at, why)
        elif entry.key == "PublishPort":
            why = f"PublishPort={entry.value} is not [IP:]HOST:CONTAINER"
            take_entry(parse_publish(entry.value), spec.publish, out.problem, at, why)
        elif entry.key == "AddDevice":
            spec.devices.append(entry.value.lstrip("-"))
    read_container(out, spec, host_name=host_name, host=host)
    note_unread(entries, "Container", _READ, path, "Quadlet file", out)
