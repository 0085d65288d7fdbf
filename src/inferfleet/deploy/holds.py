"""Holds: a service kept down on purpose (``inferfleet stop --hold REASON``).

One small JSON file per held service under ``<state_dir>/holds`` on its
host, beside the markers. While it is there, ``apply`` (so ``deploy``) and
``up`` leave the service down and say so in their plan (``held: reason,
since, by``), ``status`` shows it ``held`` (a choice, not a problem), and
only ``inferfleet start`` lifts it. The reason is typed by a person and
ends up in plans, JSON documents and terminals: it is one printable line,
bounded in length.
"""

from __future__ import annotations

import getpass
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

from inferfleet.errors import FleetError, UsageError
from inferfleet.io.state_files import StateFolder

HOLDS = "holds"  # <state_dir>/holds/<service>.json
MAX_REASON = 200


class HoldError(FleetError, ValueError):
    """A hold file cannot be read."""


@dataclass(frozen=True)
class Hold:
    service: str
    reason: str
    since: float  # epoch seconds
    by: str  # user@machine that stopped it

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.since))
        return f"held: {self.reason}, since {when}, by {self.by}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def checked_reason(reason: str) -> str:
    """The reason as a hold keeps it; a usage error for an empty, long or non-printable one."""
    text = reason.strip()
    if not text or len(text) > MAX_REASON or not text.isprintable():
        raise UsageError(
            f"a hold's reason must be one printable line of 1 to {MAX_REASON} characters "
            f"(got {len(text)}{', with control characters' if not text.isprintable() else ''})",
            hint='say why in a few words: inferfleet stop SERVICE --hold "disk replacement"',
        )
    return text


def new_hold(service: str, reason: str) -> Hold:
    return Hold(
        service, checked_reason(reason), time.time(), f"{getpass.getuser()}@{socket.gethostname()}"
    )


class HoldStore(StateFolder[Hold]):
    shape = Hold
    subfolder = HOLDS
    what = "hold"
    error = HoldError
    fix = "`inferfleet start SERVICE` lifts the hold (and removes the file)"

    def problem(self, value: Hold) -> str | None:
        if value.reason.isprintable() and len(value.reason) <= MAX_REASON:
            return None
        return "its reason is not one printable line"
