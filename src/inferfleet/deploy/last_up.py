"""The fleet ``up`` last ran on this machine: where the follow-up verbs look last.

``up`` with no fleet file found runs the embedded example; the next commands
a newcomer types (``status``, ``down``, ``logs``, ``probe``, ``bench``) find
no fleet file either. So every ``up`` records the fleet file it ran (and
whether it was the embedded example) in this machine's state dir, and those
verbs, when discovery finds nothing, use it and say so on stderr.

The record is a state file like any other: small, typed, read through
:mod:`inferfleet.io.state_files`; one naming a file that is gone is ignored.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from inferfleet import paths
from inferfleet.errors import UsageError
from inferfleet.io.files import atomic_write
from inferfleet.io.state_files import read_state

RECORD_NAME = "last-up.json"


@dataclass(frozen=True)
class LastUp:
    file: str  # absolute path of the fleet file up ran
    example: bool  # it was the embedded example (no fleet file was found)
    at: float  # when (epoch seconds)


def record_path() -> Path:
    return paths.state_dir() / RECORD_NAME


def remember(fleet_file: Path, *, example: bool) -> None:
    """Record the fleet ``up`` runs now (atomically: a killed up leaves the old record)."""
    path = record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    record = LastUp(str(fleet_file.resolve()), example, round(time.time(), 3))
    atomic_write(path, json.dumps(asdict(record)) + "\n")


def _check(record: LastUp) -> str | None:
    if not record.file.isprintable() or not Path(record.file).is_absolute():
        return "file: not an absolute path of printable characters"
    return None


def recall() -> LastUp | None:
    """The last ``up``'s record when the file it names still exists; None otherwise."""
    path = record_path()
    record = read_state(
        path,
        LastUp,
        what="the record of the last up",
        error=UsageError,
        hint=f"remove {path}; the next `inferfleet up` writes it again",
        check=_check,
    )
    if record is None or not Path(record.file).is_file():
        return None
    return record
