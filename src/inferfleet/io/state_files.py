"""Reading a JSON state file into its typed shape.

Records, markers and lock holders are small JSON files a crash, a full disk,
an editor or another version of inferfleet may have left in any shape. Each
is read here, parsed and validated in one step (pydantic, strict JSON mode,
against the dataclass that writes it): valid JSON of the wrong shape
(``[]``, ``{"pid": "x"}``, missing keys) becomes the caller's
:class:`~inferfleet.errors.FleetError` naming the file, what is wrong in it
and the fix, never a ``TypeError`` or ``KeyError`` deep in a caller. Writes
go through :func:`inferfleet.io.files.atomic_write` (fsync + rename), so a
killed writer leaves the old file or the new one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from inferfleet.bounded import read_bounded
from inferfleet.errors import FleetError
from inferfleet.io.files import atomic_write

if TYPE_CHECKING:
    # Imported where a file is parsed: the host lock imports this module, and
    # the deploy's no-op fast path takes that lock before pydantic is loaded.
    from pydantic import TypeAdapter, ValidationError

T = TypeVar("T")
MAX_STATE_BYTES = 1024 * 1024  # a record is a few hundred bytes; more is not ours
_SHOWN_PROBLEMS = 3

ErrorFactory = Callable[..., FleetError]


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(shape: type[T]) -> TypeAdapter[T]:
    from pydantic import TypeAdapter

    if shape not in _ADAPTERS:
        _ADAPTERS[shape] = TypeAdapter(shape)
    return _ADAPTERS[shape]


def parse_state(
    raw: bytes | str,
    shape: type[T],
    *,
    path: Path,
    what: str,
    error: ErrorFactory,
    hint: str,
    check: Callable[[T], str | None] = lambda _value: None,
) -> T:
    """``raw`` as a ``shape``; else ``error(message, where=path, hint=hint)``.

    ``check`` may name one more problem pydantic cannot see (a pid of 0).
    """
    if len(raw) > MAX_STATE_BYTES:
        raise error(
            f"{what} {path} is damaged: {len(raw)} bytes, far more than such a file holds",
            where=str(path),
            hint=hint,
        )
    from pydantic import ValidationError

    try:
        value: T = _adapter(shape).validate_json(raw, strict=True)
    except ValidationError as exc:
        raise error(
            f"{what} {path} is damaged: {describe(exc)}", where=str(path), hint=hint
        ) from None
    problem = check(value)
    if problem is not None:
        raise error(f"{what} {path} is damaged: {problem}", where=str(path), hint=hint)
    return value


def read_state(
    path: Path,
    shape: type[T],
    *,
    what: str,
    error: ErrorFactory,
    hint: str,
    check: Callable[[T], str | None] = lambda _value: None,
) -> T | None:
    """The state file at ``path`` as a ``shape``; None when there is none.

    An unreadable file or one of the wrong shape raises ``error`` (a
    :class:`FleetError` subclass) with the file as ``where`` and ``hint``.
    """
    try:
        # Never blocks on a FIFO and never reads more than a state file can hold.
        raw = read_bounded(path, MAX_STATE_BYTES, what=what, error=error, hint=hint)
    except FileNotFoundError:
        return None
    return parse_state(raw, shape, path=path, what=what, error=error, hint=hint, check=check)


def describe(exc: ValidationError) -> str:
    """The first few problems of a validation, one line: ``pid: Input should be ...``."""
    parts = []
    for problem in exc.errors()[:_SHOWN_PROBLEMS]:
        loc = ".".join(str(p) for p in problem["loc"])
        text = str(problem["msg"])
        if problem["type"] == "json_invalid":
            text = "not valid JSON"
        parts.append(f"{loc}: {text}" if loc else text)
    more = exc.error_count() - _SHOWN_PROBLEMS
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def write_state(where: Path, data: bytes) -> None:
    """Write a state file the readers here will take: its folder made, atomically."""
    where.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(where, data)


def write_cache(where: Path, data: bytes) -> bool:
    """Best effort for a cache entry: False (nothing written) when the reader would refuse
    it (over :data:`MAX_STATE_BYTES`: read from the source each time instead) or the place
    is read-only (that costs requests, not the answer)."""
    if len(data) > MAX_STATE_BYTES:
        return False
    try:
        write_state(where, data)
    except OSError:
        return False
    return True


class Stored(Protocol):
    """What a :class:`StateFolder` keeps: one per service, written as its ``to_json``."""

    @property
    def service(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=Stored)


class StateFolder(Generic[S]):
    """One JSON state file per service in ``<state dir>/<subfolder>``, each a ``shape``.

    Records, markers and holds are all kept this way: read through
    :func:`read_state` (a damaged file is the store's ``error``), written
    atomically. A store names its shape, what a file is called in messages,
    its error and the fix; :meth:`problem` may name what the shape cannot.
    """

    shape: type[S]
    subfolder: str  # of the state directory
    what: str
    error: ErrorFactory
    fix: str

    def __init__(self, state_dir: Path) -> None:
        self.folder = state_dir / self.subfolder

    def path(self, service: str) -> Path:
        return self.folder / f"{service}.json"

    def hint(self, path: Path) -> str:
        """The fix said when the file at ``path`` is damaged."""
        return self.fix

    def problem(self, value: S) -> str | None:
        """One more problem of a file that has the shape, None when there is none."""
        return None

    def read(self, service: str) -> S | None:
        """The service's file, None when there is none; a damaged one is the store's error."""
        path = self.path(service)
        hint = self.hint(path)
        return read_state(
            path, self.shape, what=self.what, error=self.error, hint=hint, check=self.problem
        )

    def names(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.glob("*.json"))

    def all(self) -> dict[str, S]:
        """Every readable file, by the service it names."""
        found = (self.read(name) for name in self.names())
        return {value.service: value for value in found if value is not None}

    def write(self, value: S) -> Path:
        """Record ``value`` atomically (temp file + rename)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(value.service)
        atomic_write(path, json.dumps(value.to_json(), indent=2) + "\n")
        return path

    def remove(self, service: str) -> bool:
        """Remove the service's file; whether there was one."""
        try:
            self.path(service).unlink()
        except FileNotFoundError:
            return False
        return True
