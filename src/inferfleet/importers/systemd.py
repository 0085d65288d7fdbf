"""systemd units (``.service``) that start llama-server, read into services (backend systemd).

The unit is parsed by systemd.syntax(7): sections, ``Key=Value``, ``#``/``;``
comments, a trailing ``\\`` joining the next line. ``ExecStart`` is split
the way systemd splits it (quotes, ``${VAR}`` from ``Environment=``); a
specifier (``%h``) or a ``$VAR`` the unit does not set is refused with its
line, as is a shell construct (systemd runs no shell: a ``|`` reaches the
server as a word). ``Environment=`` is sorted like any import (secrets never
copied); ``EnvironmentFile=`` becomes the service's ``secrets_env`` (read by
the server, never by the import); ``User=``, ``Restart=``, ``RestartSec=``
and ``TimeoutStopSec=`` become the unit options; every other key is listed
as not imported, with its line (inferfleet renders its own unit).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferfleet.fleetfile.fleet import Host
from inferfleet.importers import commandline
from inferfleet.importers.llamacpp import model_name
from inferfleet.importers.result import Imported, Where
from inferfleet.importers.service import EnvItem, Source, read_service
from inferfleet.importers.yamlsource import read_source

MAX_UNIT_BYTES = 256 * 1024
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_SPECIFIER = re.compile(r"%[^%]")
_RESTART = {"always", "on-failure", "no"}


@dataclass(frozen=True)
class Entry:
    section: str
    key: str
    value: str
    line: int  # 1-based, where the key is


def parse_unit(text: str) -> list[Entry]:
    """Every ``Key=Value`` of a unit file, in order, continuation lines joined."""
    entries: list[Entry] = []
    section = ""
    pending: tuple[str, int] | None = None  # text so far, its first line
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if pending is None and (not line or line[0] in "#;"):
            continue
        if pending is not None and line[:1] in ("#", ";"):
            continue  # comment lines inside a continuation are skipped
        if pending is not None:
            joined, start = pending[0] + " " + line, pending[1]
        else:
            joined, start = line, number
        if joined.endswith("\\"):
            pending = (joined[:-1].rstrip(), start)
            continue
        pending = None
        if joined.startswith("[") and joined.endswith("]"):
            section = joined[1:-1]
            continue
        key, eq, value = joined.partition("=")
        if eq:
            entries.append(Entry(section, key.strip(), value.strip(), start))
    return entries


def read_unit_text(path: Path) -> str:
    return read_source(path, MAX_UNIT_BYTES, "unit file").decode("utf-8", errors="replace")


def environment(entries: list[Entry], key: str, path: Path, out: Imported) -> list[EnvItem]:
    """``Environment=`` assignments (several per line, quoted), later ones winning."""
    found: dict[str, EnvItem] = {}
    for entry in entries:
        if entry.key != key:
            continue
        where = Where(str(path), entry.line)
        try:
            words = shlex.split(entry.value)
        except ValueError as exc:
            out.problem(where, f"{key}= cannot be split: {exc}")
            continue
        if not words:
            found.clear()  # an empty assignment resets the list
        for word in words:
            name, eq, value = word.partition("=")
            if not eq or not name:
                out.problem(where, f"{key}= item {word!r} is not NAME=value")
                continue
            found[name] = EnvItem(name, value, where)
    return list(found.values())


def exec_words(
    value: str, env: list[EnvItem], where: Where, out: Imported, *, key: str, prefixes: bool = True
) -> list[str] | None:
    """A command line as systemd splits it, ``${VAR}`` resolved from the unit's environment
    (``prefixes``: ExecStart's ``-@:+!``; Quadlet's ``Exec=`` holds arguments only)."""
    command = value.lstrip("@-:+!") if prefixes else value
    specifier = _SPECIFIER.search(command.replace("%%", ""))
    if specifier is not None:
        out.problem(
            where,
            f"{key}= uses the specifier {specifier[0]}",
            "write the value it stands for: the fleet renders the unit itself",
        )
        return None
    construct = commandline.shell_construct(command)
    if construct is not None:
        out.problem(
            where,
            f"{key}= uses {construct.construct!r}, which needs a shell: systemd passes it to "
            "the server as a word",
            "write the server's command alone",
        )
        return None
    values = {item.name: item.value for item in env}
    missing = sorted({m[1] or m[2] for m in _VAR.finditer(command)} - set(values))
    if missing:
        out.problem(
            where,
            f"{key}= uses ${missing[0]}, which the unit does not set with Environment=",
            "write the value (variables from an EnvironmentFile are not read by the import)",
        )
        return None
    text = _VAR.sub(lambda m: shlex.quote(values[m[1] or m[2]]), command)
    try:
        return shlex.split(text.replace("%%", "%"))
    except ValueError as exc:
        out.problem(where, f"{key}= cannot be split into words: {exc}")
        return None


_UNIT_OPTS = {"User": "user", "Restart": "restart", "RestartSec": "restart_sec",
              "TimeoutStopSec": "stop_timeout"}  # fmt: skip
_READ = {"ExecStart", "Environment", "EnvironmentFile", *_UNIT_OPTS}


def service_name(path: Path) -> str:
    """A unit's service name: its file name without the suffix (and inferfleet's prefix)."""
    stem = path.name.rsplit(".", 1)[0].removeprefix("inferfleet-")
    return model_name(stem)


def read_units(paths: list[Path], host_name: str, host: Host | None) -> Imported:
    out = Imported(host=host_name)
    for path in paths:
        entries = parse_unit(read_unit_text(path))
        _one_unit(path, entries, host_name, host, out)
    return out


def _one_unit(
    path: Path, entries: list[Entry], host_name: str, host: Host | None, out: Imported
) -> None:
    starts = [e for e in entries if e.section == "Service" and e.key == "ExecStart"]
    if len(starts) != 1:
        out.problem(
            Where(str(path), starts[1].line if len(starts) > 1 else None),
            f"a unit that starts a server has one ExecStart=, this one has {len(starts)}",
        )
        return
    service_entries = [e for e in entries if e.section == "Service"]
    env = environment(service_entries, "Environment", path, out)
    where = Where(str(path), starts[0].line)
    words = exec_words(starts[0].value, env, where, out, key="ExecStart")
    if words is None:
        return
    files = [e for e in service_entries if e.key == "EnvironmentFile"]
    secrets = files[-1].value.lstrip("-") if files else None
    for extra in files[:-1]:
        out.problem(
            Where(str(path), extra.line),
            "more than one EnvironmentFile=: a service reads one secrets_env file",
            "merge them into one file",
        )
    if secrets is not None:
        out.note(
            Where(str(path), files[-1].line),
            f"EnvironmentFile={secrets}: the service's secrets_env (the import does not read it)",
        )
    source = Source(service_name(path), words, where, env=env, secrets_file=secrets)
    service = read_service(out, source, host_name=host_name, host=host)
    if service is None:
        return
    service.block["backend"] = "systemd"
    unit: dict[str, Any] = {}
    if "/systemd/user/" in str(path.resolve()):
        unit["scope"] = "user"
    for entry in service_entries:
        option = _UNIT_OPTS.get(entry.key)
        if option is None:
            continue
        value: Any = entry.value
        if option == "restart" and value not in _RESTART:
            out.note(Where(str(path), entry.line), f"Restart={value}: kept as on-failure")
            value = "on-failure"
        elif option in ("restart_sec", "stop_timeout") and value.isdigit():
            value = f"{value}s"  # systemd reads a bare number as seconds
        unit[option] = value
    if unit:
        service.block["unit"] = unit
    out.services[service.name] = service
    note_unread(entries, "Service", _READ, path, "unit", out)


def note_unread(
    entries: list[Entry], section: str, read: set[str], path: Path, what: str, out: Imported
) -> None:
    """Every key but those of ``section`` the import ``read``, listed as not imported: the
    fleet renders its own unit file (``what``)."""
    for entry in entries:
        if not (entry.section == section and entry.key in read):
            out.note(
                Where(str(path), entry.line),
                f"{entry.key}= ([{entry.section}]): not imported (inferfleet renders its own "
                f"{what})",
            )
