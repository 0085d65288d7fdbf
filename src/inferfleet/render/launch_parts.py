"""What every launch is made of, a service's or a front door's: the files installed for
it, and what of the caller's environment a process started for it inherits."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

UNIT_KINDS = {"systemd", "quadlet"}


@dataclass(frozen=True)
class InstallFile:
    path: str  # absolute path on the host
    content: str
    kind: str  # env | preset | systemd | quadlet

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content.encode()).hexdigest()


# What a process-backend server inherits from whoever runs `up` or `apply`.
PASSED_ENV = frozenset({"PATH", "HOME", "LANG", "TZ"})
PASSED_ENV_PREFIXES = ("LC_",)


def passed_from_caller(name: str) -> bool:
    return name in PASSED_ENV or name.startswith(PASSED_ENV_PREFIXES)
