"""A compose file's llama-server services, read into services (backend quadlet).

The compose specification's service keys that describe the server
(``image``, ``entrypoint``, ``command``, ``environment``, ``env_file``,
``volumes``, ``ports``, ``devices``,
``deploy.resources.reservations.devices``, ``user``, ``network_mode``) become
the service (:mod:`inferfleet.importers.container`), to run under Quadlet;
services that are not a llama-server (a web UI beside it) are listed and left
out. Compose interpolates ``${VAR}`` from the operator's shell and ``.env``:
the import refuses one, with its line, rather than guess its value.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from inferfleet.fleetfile.fleet import Host
from inferfleet.importers import commandline
from inferfleet.importers.container import (
    ContainerSpec,
    Published,
    Volume,
    entrypoint_of,
    parse_publish,
    parse_volume,
    read_container,
    take_entry,
)
from inferfleet.importers.llamacpp import model_name
from inferfleet.importers.result import Imported, Where
from inferfleet.importers.service import EnvItem
from inferfleet.importers.yamlsource import key_line, read_yaml

_INTERPOLATION = re.compile(r"(?<!\$)\$(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)")
_READ = {"image", "entrypoint", "command", "environment", "env_file", "volumes", "ports",
         "devices", "deploy", "user", "network_mode", "container_name", "shm_size"}  # fmt: skip


def read_compose(path: Path, host_name: str, host: Host | None) -> Imported:
    out = Imported(host=host_name)
    doc = read_yaml(path)
    services = doc.get("services") if isinstance(doc, dict) else None
    if not isinstance(services, dict):
        out.problem(Where(str(path), 1), "not a compose file: no services: mapping")
        return out
    for name, body in services.items():
        where = Where(str(path), key_line(services, name))
        if not isinstance(body, dict) or not isinstance(body.get("image"), str):
            out.note(where, f"services.{name}: no image; not imported")
            continue
        _one(path, str(name), body, where, host_name, host, out)
    return out


def _words(value: Any, what: str, where: Where, out: Imported) -> list[str] | None:
    if value is None:
        return []
    if isinstance(value, list):
        words = [str(v) for v in value]
    else:
        try:
            words = shlex.split(str(value))
        except ValueError as exc:
            out.problem(where, f"{what} cannot be split into words: {exc}")
            return None
    for word in words:
        found = _INTERPOLATION.search(word)
        if found is not None:
            out.problem(
                where,
                f"{what} uses ${found[1]}, which compose takes from the shell or .env",
                "write the value",
            )
            return None
    return [w.replace("$$", "$") for w in words]


def _one(
    path: Path,
    name: str,
    body: Any,
    where: Where,
    host_name: str,
    host: Host | None,
    out: Imported,
) -> None:
    def at(key: str) -> Where:
        return Where(str(path), key_line(body, key) or where.line)

    args = _words(body.get("command"), f"services.{name}.command", at("command"), out)
    entrypoint = _words(
        body.get("entrypoint"), f"services.{name}.entrypoint", at("entrypoint"), out
    )
    if args is None or entrypoint is None:
        return
    spec = ContainerSpec(
        name=model_name(name),
        where=at("command"),
        image=str(body["image"]),
        args=args,
        entrypoint=entrypoint or None,
        env=_environment(body.get("environment"), at("environment")),
        user=None if body.get("user") is None else str(body["user"]),
        host_network=body.get("network_mode") == "host",
        shm_size=None if body.get("shm_size") is None else str(body["shm_size"]),
    )
    if entrypoint_of(spec) is None and commandline.identify(spec.args) is None:
        out.note(where, f"services.{name}: image {spec.image} is not a llama-server; not imported")
        return
    env_file = body.get("env_file")
    if env_file:
        files = env_file if isinstance(env_file, list) else [env_file]
        first = files[-1]
        spec.env_file = str(first["path"] if isinstance(first, dict) else first)
        if len(files) > 1:
            out.problem(at("env_file"), "more than one env_file: a service reads one secrets_env")
    for item in body.get("volumes") or []:
        why = f"services.{name}.volumes: {item!r} has no host path; left out"
        take_entry(_volume(item), spec.volumes, out.note, at("volumes"), why)
    for item in body.get("ports") or []:
        why = f"services.{name}.ports: {item!r} is not [IP:]HOST:CONTAINER"
        take_entry(_port(item), spec.publish, out.problem, at("ports"), why)
    for item in body.get("devices") or []:
        spec.devices.append(str(item).split(":", 1)[0])
    spec.devices += _gpus(body.get("deploy"))
    read_container(out, spec, host_name=host_name, host=host)
    for key in body:
        if key not in _READ:
            out.note(at(str(key)), f"services.{name}.{key}: not imported (no equivalent)")


def _environment(value: Any, where: Where) -> list[EnvItem]:
    if isinstance(value, dict):
        return [EnvItem(str(k), "" if v is None else str(v), where) for k, v in value.items()]
    found = []
    for item in value or []:
        key, _, val = str(item).partition("=")
        found.append(EnvItem(key, val, where))
    return found


def _volume(item: Any) -> Volume | None:
    if isinstance(item, dict):
        if item.get("type", "volume") != "bind":
            return None
        return Volume(str(item["source"]), str(item["target"]), bool(item.get("read_only")))
    return parse_volume(str(item))


def _port(item: Any) -> Published | None:
    if isinstance(item, dict):
        try:
            inside = int(item["target"])
            outside = int(item.get("published", inside))
        except (KeyError, ValueError):
            return None
        return item.get("host_ip"), outside, inside
    return parse_publish(str(item))


def _gpus(deploy: Any) -> list[str]:
    """``deploy.resources.reservations.devices`` of NVIDIA GPUs as CDI device names."""
    try:
        wanted = deploy["resources"]["reservations"]["devices"]
    except (KeyError, TypeError):
        return []
    found: list[str] = []
    for item in wanted or []:
        if not isinstance(item, dict) or item.get("driver", "nvidia") != "nvidia":
            continue
        ids = item.get("device_ids")
        if ids:
            found += [f"nvidia.com/gpu={i}" for i in ids]
        else:
            found.append("nvidia.com/gpu=all")
    return found
