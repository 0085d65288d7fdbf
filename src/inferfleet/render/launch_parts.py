"""What every launch is made of, a service's or a front door's: the files installed for
it, and what of the caller's environment a process started for it inherits."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

UNIT_KINDS = {"systemd", "quadlet"}


@dataclass(frozen=True)
class InstallFile:
    path: str  # absolute path on the host
    content: str
    kind: str  # env | preset | systemd | quadlet

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content.encode()).hexdigest()


def launch_digest(
    version: int,
    argv: Sequence[str],
    env: Mapping[str, str],
    files: Sequence[InstallFile],
    health: str,
    **more: object,
) -> str:
    """The one digest of a launch: argv, env, the installed files' digests and the health
    route (with what else defines it, ``more``): a change of any restarts what runs."""
    data = {
        "version": version,
        "argv": list(argv),
        "env": dict(env),
        "files": sorted((f.path, f.sha256) for f in files),
        "health": health,
        **more,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


# What a process-backend server inherits from whoever runs `up` or `apply`.
PASSED_ENV = frozenset({"PATH", "HOME", "LANG", "TZ"})
PASSED_ENV_PREFIXES = ("LC_",)


def passed_from_caller(name: str) -> bool:
    return name in PASSED_ENV or name.startswith(PASSED_ENV_PREFIXES)


class _Installed(Protocol):
    @property
    def unit(self) -> str: ...

    @property
    def files(self) -> list[InstallFile]: ...


class UnitParts:
    """What a launch (a service's, a front door's) derives from its unit name and files."""

    @property
    def service_unit(self: _Installed) -> str:
        """The systemd unit that runs it (Quadlet generates ``NAME.service`` from the file)."""
        return f"{self.unit}.service"

    @property
    def unit_file(self: _Installed) -> InstallFile | None:
        return next((f for f in self.files if f.kind in UNIT_KINDS), None)
