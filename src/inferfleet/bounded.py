"""Reading files inferfleet did not write: bounded, regular, never blocking.

Every file that comes from outside (a template the fleet file names, a
model's manifest, ``config.json``, an index, a state file another process
may have replaced) is read here, so the same rules hold everywhere:

- it is opened with ``O_NONBLOCK`` and must be a regular file: a FIFO opens
  at once instead of waiting for a writer forever, a device (``/dev/zero``)
  or a folder is refused before a byte is read;
- its size is checked against a bound before reading, and the read itself
  stops one byte past the bound (``/proc`` files report size 0);
- a file the fleet file declares lies inside the fleet file's folder: a
  relative path without ``..``, and still inside once symlinks are resolved
  (``/proc/self/environ`` or ``../../.ssh/id_ed25519`` never reach a
  rendered manifest);
- JSON is parsed with bounded nesting (measured on the bytes, so no
  ``RecursionError``) and bounded integer literals (CPython refuses over
  4,300 digits with a bare ``ValueError``), and every failure is the caller's
  error naming the file: one bad file never aborts a whole ``check``.

Failures are raised as ``error(message, where=..., hint=...)``: the caller's
:class:`~inferfleet.errors.FleetError` subclass, like :mod:`state_files`.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from inferfleet.errors import FleetError

ErrorFactory = Callable[..., FleetError]

MAX_DECLARED_TEXT = 1 << 20  # a template or settings file the fleet names is hand-written
MAX_SECRET_FILE = 64 * 1024  # a token file, a key file: a handful of lines
MAX_JSON_DEPTH = 64  # config.json nests 3-4 levels, a safetensors header 3
MAX_INT_DIGITS = 64  # far past any size, count or id a file of ours holds


class BoundedReadError(FleetError, OSError):
    """A file from outside cannot be read within its bounds (the default error)."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(
    path: Path | str,
    *,
    what: str = "file",
    error: ErrorFactory = BoundedReadError,
    hint: str = "",
    follow_symlinks: bool = True,
) -> int:
    """A read-only descriptor of ``path``, which must be a regular file.

    Opened without blocking (a FIFO with no writer would hang a plain open);
    ``FileNotFoundError`` passes through for the caller to treat as absence.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if not follow_symlinks and os.path.islink(path):
            raise error(f"{what} {path} is a symlink", where=str(path), hint=hint) from None
        raise error(
            f"cannot read {what} {path}: {exc.strerror or exc}", where=str(path), hint=hint
        ) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise error(
            f"{what} {path} is {_kind(mode)}, not a regular file", where=str(path), hint=hint
        )
    return fd


def read_bounded(
    path: Path | str,
    max_bytes: int,
    *,
    what: str = "file",
    error: ErrorFactory = BoundedReadError,
    hint: str = "",
    follow_symlinks: bool = True,
    private: bool = False,
) -> bytes:
    """The bytes of regular file ``path``, at most ``max_bytes`` (checked before reading).

    ``private``: the file holds a secret (a token, keys): refused when its group or
    others may read or write it (L-06), judged on the open file, so a file swapped after
    the check is not read.
    """
    fd = open_regular(path, what=what, error=error, hint=hint, follow_symlinks=follow_symlinks)
    try:
        info = os.fstat(fd)
        if private and info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise error(
                f"{what} {path} can be read by other users (mode {stat.S_IMODE(info.st_mode):04o})",
                where=str(path),
                hint=f"chmod 600 {path}: it holds a secret (L-06); replace the secret if others "
                "may have read it",
            )
        size = info.st_size
        if size > max_bytes:
            raise error(
                f"{what} {path} has {size:,} bytes; at most {max_bytes:,} are read",
                where=str(path),
                hint=hint,
            )
        parts: list[bytes] = []
        left = max_bytes + 1  # a file that grows meanwhile, or /proc's size 0
        try:
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                parts.append(chunk)
                left -= len(chunk)
        except OSError as exc:
            raise error(
                f"cannot read {what} {path}: {exc.strerror or exc}", where=str(path), hint=hint
            ) from None
    finally:
        os.close(fd)
    if left <= 0:
        raise error(
            f"{what} {path} has more than {max_bytes:,} bytes; at most {max_bytes:,} are read",
            where=str(path),
            hint=hint,
        )
    return b"".join(parts)


def read_bounded_text(
    path: Path | str,
    max_bytes: int,
    *,
    what: str = "file",
    error: ErrorFactory = BoundedReadError,
    hint: str = "",
    name: str = "",
    private: bool = False,
) -> str:
    """The UTF-8 text of regular file ``path``, at most ``max_bytes``.

    Unlike :func:`read_bounded`, absence is an ``error`` too: the file was
    named, so a missing one is the caller's problem to report, not a
    ``FileNotFoundError`` escaping as a traceback. ``name`` is how messages
    name the file (default: the path); ``private`` as for :func:`read_bounded`.
    """
    name = name or str(path)
    try:
        data = read_bounded(path, max_bytes, what=what, error=error, hint=hint, private=private)
    except FileNotFoundError:
        raise error(
            f"cannot read {what} {name}: it does not exist", where=str(path), hint=hint
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{what} {name} is not UTF-8 text (byte {exc.start}, line {line})",
            where=str(path),
            hint=hint,
        ) from None


# ----------------------------------------------------------------- files the fleet declares


def tree_path_problem(root: Path, relative: str, *, must_exist: bool = True) -> str | None:
    """Why ``relative`` is not a regular file inside ``root`` (the fleet file's folder).

    With ``must_exist=False`` a missing file is no problem here (its reader says so).
    """
    pure = PurePosixPath(relative)
    if not relative or pure.is_absolute() or relative.startswith("~"):
        return f"{relative!r} is not a path relative to the fleet file's folder"
    if ".." in pure.parts:
        return f"{relative!r} has a '..' part: it would leave the fleet file's folder"
    base = root.resolve()
    target = (root / relative).resolve()
    if base not in target.parents:
        return f"{relative!r} leads outside the fleet file's folder (to {target})"
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return f"{relative!r} does not exist next to the fleet file" if must_exist else None
    except OSError as exc:
        return f"{relative!r} cannot be read: {exc.strerror or exc}"
    if not stat.S_ISREG(mode):
        return f"{relative!r} is {_kind(mode)}, not a regular file"
    return None


def read_tree_file(
    root: Path,
    relative: str,
    max_bytes: int,
    *,
    what: str,
    error: ErrorFactory,
    where: str,
    hint: str = "",
) -> str:
    """The UTF-8 text of ``relative``, a regular file inside ``root``, at most ``max_bytes``.

    The one way a renderer or a check reads a file the fleet file names: an
    absolute path, a ``..`` part, a symlink leaving ``root``, a device or a
    FIFO is ``error(message, where=where, hint=hint)`` and nothing is read.
    """
    problem = tree_path_problem(root, relative)
    if problem is not None:
        raise error(f"{what} {problem}", where=where, hint=hint or _TREE_HINT)
    target = (root / relative).resolve()

    def at_field(message: str, **_path_and_hint: str) -> FleetError:
        # Where it is fixed: the fleet file's field, not the resolved path.
        return error(message, where=where, hint=hint)

    # A file removed between the check and the read is reported as absent.
    return read_bounded_text(
        target, max_bytes, what=what, error=at_field, hint=hint, name=repr(relative)
    )


_TREE_HINT = (
    "commit the file in the fleet repository and name it relative to the fleet file "
    "(no absolute path, no '..', no symlink leading out)"
)


# ----------------------------------------------------------------- JSON


# A JSON string (escapes included), unrolled so the regex engine never backtracks.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_depth(body: bytes, limit: int) -> int:
    """How deep ``body``'s JSON arrays and objects nest, counted up to ``limit + 1``.

    Strings are cut out and everything but brackets dropped at C speed; the
    brackets left are counted without recursing, so a document nested a
    million levels deep is measured, never parsed.
    """
    structure = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in structure:
        if byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        else:
            depth -= 1
    return deepest


class _Refused(ValueError):
    pass


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text):,} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _constant(name: str) -> float:
    raise _Refused(f"{name} is not JSON")


def parse_json(
    raw: bytes,
    *,
    what: str,
    where: str,
    error: ErrorFactory = BoundedReadError,
    hint: str = "",
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """``raw`` as JSON, nesting and integer literals bounded; else the caller's error."""
    if nesting_depth(raw, max_depth) > max_depth:
        raise error(
            f"{what} nests arrays or objects more than {max_depth} levels deep",
            where=where,
            hint=hint,
        )
    try:
        return json.loads(raw.decode("utf-8"), parse_int=_int, parse_constant=_constant)
    except _Refused as exc:
        raise error(f"{what} is not valid: {exc}", where=where, hint=hint) from None
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not UTF-8 (byte {exc.start})", where=where, hint=hint) from None
    except (ValueError, RecursionError) as exc:
        raise error(f"{what} is not JSON: {exc}", where=where, hint=hint) from None


def load_json(
    path: Path,
    max_bytes: int,
    *,
    what: str,
    error: ErrorFactory = BoundedReadError,
    hint: str = "",
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """The JSON document in regular file ``path`` (size checked before reading)."""
    raw = read_bounded(path, max_bytes, what=what, error=error, hint=hint)
    return parse_json(raw, what=what, where=str(path), error=error, hint=hint, max_depth=max_depth)
