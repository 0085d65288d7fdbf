"""The flags a runtime binary on this machine takes, read from its ``--help``.

The check that refuses a misspelt ``extra_args`` flag compares it with what
the pinned runtime itself accepts, so a typo fails in CI instead of
crash-looping on the host. Reading the list runs the binary (an effect, so
it lives here); parsing it is :func:`inferfleet.runtimes.flags.parse_help`.

The parsed list is cached under the cache dir, one file per binary keyed by
its path, size and modification time: a second ``check`` runs nothing, and a
rebuilt binary is read again. A damaged cache file is ignored and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from inferfleet import paths
from inferfleet.bounded import BoundedReadError, load_json
from inferfleet.errors import ProcessError
from inferfleet.fleetfile.fleet import Runtime
from inferfleet.install import llamacpp_build
from inferfleet.io import process
from inferfleet.io.files import atomic_write
from inferfleet.runtimes.flags import FlagList, FlagSource, parse_help
from inferfleet.runtimes.registry import traits

HELP_TIMEOUT_S = 60.0
CACHE_FOLDER = "flags"
MAX_CACHE_BYTES = 1 << 20  # a flag list: a few hundred names, a few kB


def binary_of(runtime: Runtime) -> Path | str:
    """The runtime's binary on this machine, or why there is none to ask."""
    if runtime.image is not None:
        return (
            f"it runs from the container image {runtime.image}; its flags are not read "
            "on this machine"
        )
    if traits(runtime.kind).pinned_build or runtime.binary is not None:
        found = llamacpp_build.server_binary(runtime)
        if found is not None:
            return found
        if runtime.binary is not None:
            return f"its binary {runtime.binary} is not on this machine"
        return "its pinned build is not installed here (`inferfleet runtime install`)"
    return "it has no binary on this machine"


def cache_path(binary: Path) -> Path:
    """Where the parsed flags of ``binary`` are cached: keyed by path, size and mtime."""
    info = binary.stat()
    key = f"{binary.resolve()}\0{info.st_size}\0{info.st_mtime_ns}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return paths.cache_dir() / CACHE_FOLDER / f"{digest}.json"


def read_flags(binary: Path) -> FlagList | str:
    """The flags ``binary --help`` lists (from the cache when it is current)."""
    try:
        cached = cache_path(binary)
    except OSError as exc:
        return f"cannot read {binary}: {exc.strerror}"
    try:
        doc = load_json(cached, MAX_CACHE_BYTES, what="the runtime flag cache")
        flags = FlagList.from_json(doc)
    except (OSError, BoundedReadError):
        flags = None  # absent, damaged or not a file: read the binary again
    if flags is not None:
        return flags
    try:
        done = process.run([str(binary), "--help"], timeout=HELP_TIMEOUT_S, check=False)
    except ProcessError as exc:
        return f"`{binary} --help` failed: {exc.message}"
    flags = parse_help(done.stdout + "\n" + done.stderr, str(binary))
    if not flags.flags:
        return f"`{binary} --help` (exit {done.returncode}) listed no flags"
    cached.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(cached, json.dumps(flags.to_json(), indent=1) + "\n")
    return flags


def runtime_flags(name: str, runtime: Runtime) -> FlagList | str:
    """The flags runtime ``name`` takes here, or why they cannot be read on this machine."""
    binary = binary_of(runtime)
    if isinstance(binary, str):
        return f"runtime {name!r}: {binary}"
    if not os.access(binary, os.X_OK):
        return f"runtime {name!r}: {binary} is not executable"
    found = read_flags(binary)
    return found if isinstance(found, FlagList) else f"runtime {name!r}: {found}"


def flag_source() -> FlagSource:
    """:func:`runtime_flags`, asked once per runtime for one ``check`` run."""
    seen: dict[str, FlagList | str] = {}

    def source(name: str, runtime: Runtime) -> FlagList | str:
        if name not in seen:
            seen[name] = runtime_flags(name, runtime)
        return seen[name]

    return source
