"""Reading a record under ``facts/``: bounded, never blocking, the reason when unusable.

The records live in the fleet repository, so they come from outside: a clone
may hold a FIFO, a device or a huge file where a record should be. Each is
read through :func:`inferfleet.bounded.read_bounded` (regular files only,
size checked before reading) and parsed with :func:`parse_state`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from inferfleet.errors import FleetError
from inferfleet.io.state_files import read_state

T = TypeVar("T")


def read_record(
    where: Path, shape: type[T], *, what: str, hint: str, check: Callable[[T], str | None]
) -> T | str | None:
    """The record at ``where``; None when there is none; why not when it is unusable."""
    try:
        return read_state(where, shape, what=what, error=FleetError, hint=hint, check=check)
    except FleetError as exc:
        return exc.render()


def mismatch(kind: str, recorded: tuple[int, str], wanted: tuple[int, str]) -> str | None:
    """Why a record is not the one asked for: another format's, or another ``kind``'s
    (``recorded`` and ``wanted`` are each a format and a name)."""
    (got_format, got_name), (format, name) = recorded, wanted
    if got_format != format:
        return f"format {got_format}, this inferfleet writes {format}"
    if got_name != name:
        return f"it records {kind} {got_name!r}"
    return None
