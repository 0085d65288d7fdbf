"""A ``binary:`` runtime runs only when it is the binary the fleet file pinned (L-42).

L-42: a runtime pointing at a fork's build segfaulted on the same model file
the pinned build served. A binary runtime carries the ``sha256`` of the
binary and the ``version`` its ``--version`` reports; before a service of
that runtime starts, the host hashes the file (the project's one streaming
hasher, :func:`inferfleet.artifacts.digests.file_digests`) and, only when the
hash matches, runs ``BINARY --version`` with a timeout: an unverified binary
is never executed.

A server binary with its GPU kernels is hundreds of MiB, so the digest and
the version are cached in the host's state dir, keyed by the file's identity
(device, inode, size, mtime_ns and ctime_ns: a replaced or rewritten file,
even with its mtime set back, has a new ctime). The cache file is hostile
input: it is read through :mod:`inferfleet.io.state_files`; a damaged one,
or one whose key is not the file's identity now, is not trusted, and the
binary is hashed again and the entry rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from inferfleet.artifacts.digests import file_digests
from inferfleet.deploy.errors import GateError
from inferfleet.errors import ProcessError
from inferfleet.fleetfile.fleet import SHA256_RE, Runtime
from inferfleet.io import process
from inferfleet.io.files import atomic_write
from inferfleet.io.state_files import read_state
from inferfleet.runtimes.version import MAX_VERSION_CHARS, parse_version, version_argv

VERSION_TIMEOUT_S = 30.0
CACHE_FOLDER = "binaries"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class FileIdentity:
    """What ``stat`` says about a file; a different answer means different bytes may be there."""

    path: str
    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity:
        st = os.stat(path)
        return cls(str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True)
class BinaryDigest:
    """One cache entry: the binary's sha256 and, once read, the version it reports."""

    identity: FileIdentity
    sha256: str
    version_kind: str = ""  # the runtime kind whose parser read ``version``
    version: str = ""


def _problem(entry: BinaryDigest) -> str | None:
    if not SHA256_RE.match(entry.sha256):
        return "sha256 is not 64 lower-case hex characters"
    if len(entry.version) > MAX_VERSION_CHARS or _CONTROL.search(entry.version):
        return "version is not one short line of text"
    return None


class DigestCache:
    """``STATE_DIR/binaries/<key>.json``: one entry per binary path."""

    def __init__(self, state_dir: Path) -> None:
        self.folder = state_dir / CACHE_FOLDER

    def path(self, binary: Path) -> Path:
        key = hashlib.sha256(str(binary).encode()).hexdigest()[:32]
        return self.folder / f"{key}.json"

    def read(self, identity: FileIdentity) -> BinaryDigest | None:
        """The entry for a file with exactly this identity; None for none, damaged or stale."""
        try:
            entry = read_state(
                self.path(Path(identity.path)),
                BinaryDigest,
                what="binary digest cache",
                error=GateError,
                hint="it is a cache: inferfleet rewrites it",
                check=_problem,
            )
        except GateError:
            return None  # not trusted: the binary is hashed again
        if entry is None or entry.identity != identity:
            return None
        return entry

    def write(self, entry: BinaryDigest) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(Path(entry.identity.path))
        atomic_write(path, json.dumps(asdict(entry), indent=2) + "\n", mode=0o600)


def binary_digest(binary: Path, cache: DigestCache | None = None) -> BinaryDigest:
    """The sha256 of ``binary`` (resolved), from the cache when its identity is unchanged."""
    identity = FileIdentity.of(binary)
    if cache is not None:
        cached = cache.read(identity)
        if cached is not None:
            return cached
    sha256 = file_digests(binary, size=identity.size).sha256
    entry = BinaryDigest(identity, sha256)
    # Changed while it was read: the hash is of no one version of the file; do not cache it.
    if cache is not None and FileIdentity.of(binary) == identity:
        cache.write(entry)
    return entry


def binary_version(kind: str, binary: Path, *, where: str, hint: str) -> str:
    """What ``binary --version`` reports, parsed for the runtime ``kind`` (GateError if nothing)."""
    try:
        done = process.run(version_argv(str(binary)), timeout=VERSION_TIMEOUT_S, check=False)
    except ProcessError as exc:
        raise GateError(
            f"cannot ask {binary} for its version: {exc.message}", where=where, hint=hint
        ) from None
    text = done.stdout + "\n" + done.stderr
    found = parse_version(kind, text)
    if found is None:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        last = _CONTROL.sub("?", lines[-1][:120]) if lines else "(no output)"
        raise GateError(
            f"`{binary} --version` reported no {kind} version (exit {done.returncode}; "
            f"last line: {last})",
            where=where,
            hint=hint,
        )
    return found


def pin_of(kind: str, binary: Path, cache: DigestCache | None = None) -> BinaryDigest:
    """The sha256 and version of a binary as it is now (for ``runtime pin``)."""
    entry = binary_digest(binary, cache)
    hint = f"run `{binary} --version` by hand to see why it does not print its version"
    version = binary_version(kind, binary, where=str(binary), hint=hint)
    done = replace(entry, version_kind=kind, version=version)
    if cache is not None and FileIdentity.of(binary) == entry.identity:
        cache.write(done)
    return done


def verify_binary(
    name: str, runtime: Runtime, binary: Path, state_dir: Path, *, where: str, fix: str
) -> BinaryDigest | None:
    """Refuse (GateError) unless ``binary`` has the pinned sha256 and reports the pinned version.

    ``fix`` is the command that prints the pins for the fleet file. Returns
    what was found, None when the runtime pins nothing (``check`` fails that).
    """
    if runtime.sha256 is None and runtime.version is None:
        return None
    cache = DigestCache(state_dir)
    real = binary.resolve()
    shown = str(binary) if real == binary else f"{binary} (-> {real})"
    nothing = "Nothing was stopped."
    try:
        entry = binary_digest(real, cache)
    except OSError as exc:
        raise GateError(
            f"runtime {name!r}: cannot read {shown} to check its sha256: {exc.strerror or exc}",
            where=f"{where}: runtimes.{name}.binary",
            hint=f"the user running inferfleet must be able to read the binary (L-42). {nothing}",
        ) from None
    if runtime.sha256 is not None and entry.sha256 != runtime.sha256:
        raise GateError(
            f"runtime {name!r}: {shown} is not the pinned binary: its sha256 is "
            f"{entry.sha256}, the fleet file pins {runtime.sha256} (L-42)",
            where=f"{where}: runtimes.{name}.sha256",
            hint=f"install the pinned build at {binary} (a fork's build segfaulted on the same "
            f"model, L-42); if this binary is the one to run, pin it: `{fix}` prints its "
            f"version and sha256 for the fleet file. {nothing}",
        )
    if runtime.version is None:
        return entry
    if entry.version_kind != runtime.kind or not entry.version:
        version = binary_version(
            runtime.kind,
            real,
            where=f"{where}: runtimes.{name}.version",
            hint=f"the binary at {binary} does not answer --version like a {runtime.kind} "
            f"server; install the pinned build there. {nothing}",
        )
        entry = replace(entry, version_kind=runtime.kind, version=version)
        if FileIdentity.of(real) == entry.identity:
            cache.write(entry)
    if entry.version != runtime.version:
        raise GateError(
            f"runtime {name!r}: {shown} reports version {entry.version!r}, the fleet file pins "
            f"{runtime.version!r} (L-42)",
            where=f"{where}: runtimes.{name}.version",
            hint=f"install the pinned build at {binary}, or, if this binary is the one to run, "
            f"pin it: `{fix}` prints its version and sha256 for the fleet file. {nothing}",
        )
    return entry
