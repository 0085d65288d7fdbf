"""The host's archive: every file ``apply`` removes or replaces goes here first.

Nothing a deploy touches is deleted: a unit, Quadlet or env file a
retirement removes (L-40), and a unit, env or settings file (L-54, L-55) a
deploy replaces with other bytes, is first copied into a dated entry under
``<state_dir>/archive`` (outside the checkout, like the markers, L-41)::

    archive/20261203T091500.123456Z-web-0123456789ab-retire/
        index.json                      service, revision, reason, when, files
        files/etc/systemd/system/web.service   the bytes, the original path mirrored

The archive folder and every entry are private (0700): the copies of env and
settings files hold secrets, and every copy is stored 0600 whatever its
original mode, which the index records and a restore gives back. An entry
appears whole or not at all (staged, then renamed). ``archive prune`` is the
only deletion; ``archive restore`` brings an entry's files back byte for
byte, refusing to overwrite a different file unless forced, and archiving
what it overwrites.

The index is hostile state (a crash, an editor, another user may have left
anything there): it is read with :func:`inferfleet.io.state_files.read_state`,
and a damaged one, a recorded path that is relative, has ``..`` or control
characters, a stored copy that is a symlink or does not match its digest,
is reported and never used to write anything.

:class:`Keeper` is the one way the deploy and ``render-settings`` remove or
replace a host file: it archives, then writes or unlinks. A symlink holds no
data and is never followed; a container a retirement removes (L-36) is not a
file: its Quadlet file is archived and its image, pinned by digest, stays.
A model directory is never removed by a retirement, so it is not archived.

A rollback (``apply --rev``) that brings a retired service back takes its
files from the archive when an entry retired for that service holds exactly
the bytes the revision renders (:meth:`Archive.matching`,
:meth:`Keeper.restore`): the copy goes back byte for byte with its mode, and
the entry's index records the restore (``restores``: when, by which
revision, which files). An entry whose bytes differ is left alone.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from inferfleet.bounded import read_bounded
from inferfleet.errors import UsageError
from inferfleet.io.archive_index import (
    MAX_COPY_BYTES,
    MAX_RESTORES,
    REASONS,
    RESTORE_MODE_MASK,
    RESTORED_BY,
    ArchivedFile,
    ArchiveError,
    ArchiveIndex,
    ArchiveRestore,
    check_destination,
    check_path,
    index_problem,
)
from inferfleet.io.become import NO_BECOME, Become
from inferfleet.io.files import atomic_write, private_dir, staged_directory, write_if_changed
from inferfleet.io.state_files import read_state

ARCHIVE_DIR = "archive"
INDEX = "index.json"
FILES = "files"
COPY_MODE = 0o600  # every copy: env and settings files hold secrets
_STAMP = "%Y%m%dT%H%M%S.%fZ"
_ENTRY_RE = re.compile(r"(\d{8}T\d{6}\.\d{6}Z)-[A-Za-z0-9._-]+")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_HINT = (
    "an entry's index.json is written by inferfleet only; move the damaged entry aside "
    "and restore its files by hand"
)


@dataclass(frozen=True)
class Entry:
    """One archive entry as listed: its index, or why it cannot be trusted."""

    name: str
    folder: Path
    index: ArchiveIndex | None
    problem: str | None
    bytes: int
    at: float  # from the entry's name (its index may be damaged)


@dataclass(frozen=True)
class Restored:
    path: str
    outcome: Literal["restored", "unchanged", "overwritten"]


@dataclass
class PruneResult:
    cutoff: float
    dry_run: bool
    entries: list[Entry] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(e.bytes for e in self.entries)


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Archive:
    """The archive under one state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / ARCHIVE_DIR

    def ready(self) -> Path:
        """The archive folder, made if missing and checked to be ours alone (0700).

        Callers check it before they stop anything, so an unusable archive
        fails a deploy while the old service still runs.
        """
        return private_dir(
            self.root,
            error=ArchiveError,
            hint="the archive holds copies of secrets: make it a folder of this user, mode 0700",
        )

    # ------------------------------------------------------------------ writing

    def put(
        self,
        paths: Iterable[Path],
        *,
        service: str,
        revision: str,
        reason: str,
        by_revision: str = "",
        now: float | None = None,
        become: Become = NO_BECOME,
    ) -> Entry | None:
        """Copy the regular files among ``paths`` into one new entry; None when none exists.

        A missing path is skipped (nothing to keep), and so is anything but a
        regular file: a symlink holds no data (removing or replacing the link
        never touches what it points to, which is not followed), a folder is
        not a file a deploy installs. A file only root may read is read
        through ``become`` (the host's sudo).
        """
        if reason not in REASONS:
            raise AssertionError(f"unknown archive reason {reason!r}")
        found: list[tuple[Path, bytes, int]] = []
        for path in dict.fromkeys(Path(p) for p in paths):
            check_path(str(path), where=str(path))
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            data = become.read(path)
            if data is not None:
                found.append((path, data, stat.S_IMODE(info.st_mode)))
        if not found:
            return None
        at = time.time() if now is None else now
        when = datetime.fromtimestamp(at, UTC)
        name = "-".join(
            [when.strftime(_STAMP), _safe(service), _safe(revision[:12] or "none"), reason]
        )
        root = self.ready()
        folder = root / name
        files = [ArchivedFile(str(p), mode, sha256_of(data), len(data)) for p, data, mode in found]
        index = ArchiveIndex(
            service=service,
            revision=revision,
            reason=reason,
            when=when.isoformat().replace("+00:00", "Z"),
            at=at,
            files=files,
            by_revision=by_revision,
        )
        with staged_directory(folder) as staging:
            staging.chmod(0o700)
            for path, data, _mode in found:
                copy = staging / FILES / str(path).lstrip("/")
                copy.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                atomic_write(copy, data, mode=COPY_MODE)
            atomic_write(
                staging / INDEX, json.dumps(asdict(index), indent=2) + "\n", mode=COPY_MODE
            )
        return Entry(name, folder, index, None, sum(len(d) for _p, d, _m in found), at)

    # ------------------------------------------------------------------ reading

    def entries(self) -> list[Entry]:
        """Every entry, oldest first; a damaged one is listed with its problem."""
        if not self.root.is_dir() or self.root.is_symlink():
            return []
        found = []
        for child in sorted(self.root.iterdir()):
            match = _ENTRY_RE.fullmatch(child.name)
            if match is None or child.is_symlink() or not child.is_dir():
                continue  # not an entry of ours (a staging folder, a stray file)
            at = datetime.strptime(match[1], _STAMP).replace(tzinfo=UTC).timestamp()
            index, problem = None, None
            try:
                index = self.index(child.name)
            except ArchiveError as exc:
                problem = exc.message
            found.append(Entry(child.name, child, index, problem, _tree_bytes(child), at))
        return found

    def entry(self, name: str) -> Entry:
        if "/" in name or name in {"", ".", ".."} or _ENTRY_RE.fullmatch(name) is None:
            raise UsageError(
                f"{name!r} is not the name of an archive entry",
                hint="`inferfleet archive list` shows the entries",
            )
        for found in self.entries():
            if found.name == name:
                return found
        raise UsageError(
            f"there is no archive entry {name} in {self.root}",
            hint="`inferfleet archive list` shows the entries",
        )

    def index(self, name: str) -> ArchiveIndex:
        path = self.root / name / INDEX
        if path.is_symlink():
            raise ArchiveError(f"archive index {path} is a symlink", where=str(path), hint=_HINT)
        index = read_state(
            path,
            ArchiveIndex,
            what="archive index",
            error=ArchiveError,
            hint=_HINT,
            check=index_problem,
        )
        if index is None:
            raise ArchiveError(f"archive index {path} is missing", where=str(path), hint=_HINT)
        return index

    # ------------------------------------------------------------------ restoring

    def restore(
        self,
        name: str,
        *,
        force: bool = False,
        by_revision: str = "",
        become: Become = NO_BECOME,
    ) -> list[Restored]:
        """Write the entry's files back where they were, byte for byte, with their modes.

        Everything is checked before anything is written: the index, each
        stored copy (a regular file inside the entry whose digest and size
        match), each destination (no symlink in its folders, not a symlink or
        folder itself, and, unless ``force``, not a different existing file).
        With ``force`` the files overwritten are archived first (reason overwrite).
        Files in folders only root may write (system units) are read and
        written through ``become`` (the host's sudo). The entry's index
        records the restore.
        """
        entry = self.entry(name)
        if entry.index is None:
            raise ArchiveError(
                f"archive entry {name} cannot be restored: {entry.problem}; nothing was restored",
                where=str(entry.folder / INDEX),
                hint=_HINT,
            )
        plan: list[tuple[ArchivedFile, bytes, Literal["restored", "unchanged", "overwritten"]]] = []
        for item in entry.index.files:
            dest = Path(item.path)
            check_destination(dest, self.root.parent)
            data = self.stored(entry, item)
            current = _current_regular(dest, become)
            outcome: Literal["restored", "unchanged", "overwritten"]
            if current is None:
                outcome = "restored"
            elif sha256_of(current) == item.sha256:
                outcome = "unchanged"
            elif force:
                outcome = "overwritten"
            else:
                raise ArchiveError(
                    f"{dest} exists with other bytes than archive entry {name} holds; "
                    "nothing was restored",
                    where=str(dest),
                    hint="pass --force to restore anyway (the file there is archived first)",
                )
            if outcome != "unchanged" and not become.active and not _writable(dest):
                raise ArchiveError(
                    f"cannot write {dest} as {getpass.getuser()}: its folder is not ours "
                    "(a system unit's?); nothing was restored",
                    where=str(dest),
                    hint="pass --become sudo (or --file with a host that has `become: sudo`), "
                    "or restore as root",
                )
            plan.append((item, data, outcome))
        overwritten = [Path(i.path) for i, _d, o in plan if o == "overwritten"]
        if overwritten:
            self.put(
                overwritten,
                service=entry.index.service,
                revision="",
                reason="overwrite",
                by_revision=by_revision,
                become=become,
            )
        done = []
        for item, data, outcome in plan:
            dest = Path(item.path)
            mode = item.mode & RESTORE_MODE_MASK
            if outcome == "unchanged":
                if stat.S_IMODE(dest.lstat().st_mode) != mode:
                    become.chmod(dest, mode)
            else:
                become.write(dest, data, mode=mode)  # atomic, escalated where needed
            done.append(Restored(item.path, outcome))
        written = [r.path for r in done if r.outcome != "unchanged"]
        if written:
            self.record_restore(name, written, by="archive restore", by_revision=by_revision)
        return done

    def matching(
        self, service: str, wanted: Mapping[str, tuple[str, int]]
    ) -> dict[str, tuple[Entry, ArchivedFile]]:
        """For each path in ``wanted`` (path -> sha256, size), the newest copy retired for
        ``service`` that holds exactly those bytes; paths without one are left out.

        Only sound entries of reason ``retire`` count: a rollback brings back what
        a retirement took away. Whether the copy itself is intact is checked when
        it is read (:meth:`stored`).
        """
        found: dict[str, tuple[Entry, ArchivedFile]] = {}
        for entry in reversed(self.entries()):  # newest first
            index = entry.index
            if index is None or index.service != service or index.reason != "retire":
                continue
            for item in index.files:
                want = wanted.get(item.path)
                if item.path not in found and want == (item.sha256, item.size):
                    found[item.path] = (entry, item)
        return found

    def record_restore(
        self,
        name: str,
        paths: list[str],
        *,
        by: str,
        by_revision: str = "",
        now: float | None = None,
    ) -> None:
        """Add one restore to the entry's index (rewritten whole: temp file + rename)."""
        if by not in RESTORED_BY:
            raise AssertionError(f"unknown restorer {by!r}")
        index = self.index(name)
        at = time.time() if now is None else now
        when = datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
        record = ArchiveRestore(when, at, list(paths), by, by_revision)
        updated = replace(index, restores=[*index.restores, record][-MAX_RESTORES:])
        atomic_write(
            self.root / name / INDEX, json.dumps(asdict(updated), indent=2) + "\n", mode=COPY_MODE
        )

    def stored(self, entry: Entry, item: ArchivedFile) -> bytes:
        """The entry's copy of ``item``, checked: a regular file inside the entry, its digest."""
        copy = entry.folder / FILES / item.path.lstrip("/")
        where = str(copy)
        try:
            info = copy.lstat()
            inside = copy.resolve().is_relative_to(entry.folder.resolve())
        except OSError as exc:
            raise ArchiveError(
                f"archive entry {entry.name} lacks its copy of {item.path} "
                f"({exc.strerror or exc}); nothing was restored",
                where=where,
                hint=_HINT,
            ) from None
        if not stat.S_ISREG(info.st_mode) or not inside:
            raise ArchiveError(
                f"the copy of {item.path} in archive entry {entry.name} is not a regular file "
                "inside the entry (a symlink?); nothing was restored",
                where=where,
                hint=_HINT,
            )
        if info.st_size != item.size:  # before reading: a 1.5 GB sparse "copy" is never read
            raise ArchiveError(
                f"the copy of {item.path} in archive entry {entry.name} does not match its index "
                f"({info.st_size} bytes; recorded {item.size}); nothing was restored",
                where=where,
                hint=_HINT,
            )
        data = read_bounded(
            copy,
            MAX_COPY_BYTES,
            what="archived copy",
            error=ArchiveError,
            hint=_HINT,
            follow_symlinks=False,
        )
        if len(data) != item.size or sha256_of(data) != item.sha256:
            raise ArchiveError(
                f"the copy of {item.path} in archive entry {entry.name} does not match its index "
                f"(sha256 {sha256_of(data)[:12]}, {len(data)} bytes; recorded "
                f"{item.sha256[:12]}, {item.size} bytes); nothing was restored",
                where=where,
                hint=_HINT,
            )
        return data

    # ------------------------------------------------------------------ pruning

    def prune(self, older_than: float, *, dry_run: bool, now: float | None = None) -> PruneResult:
        """Delete the entries older than ``older_than`` seconds (the only deletion)."""
        cutoff = (time.time() if now is None else now) - older_than
        result = PruneResult(cutoff, dry_run)
        for entry in self.entries():
            if entry.at >= cutoff:
                continue
            result.entries.append(entry)
            if not dry_run:
                shutil.rmtree(entry.folder)  # does not follow symlinks inside
        return result


@dataclass
class Keeper:
    """Removes and replaces a service's host files, archiving each first (never a bare delete)."""

    archive: Archive
    service: str
    revision: str  # the revision the files on the host came from ("" when not known)
    by_revision: str = ""  # the apply's own revision
    # How files in root's folders are read, written and removed (the host's `become`).
    become: Become = NO_BECOME
    _kept: dict[str, str] = field(default_factory=dict)  # path -> sha256 already archived

    def keep(self, paths: Iterable[Path], *, reason: str) -> Entry | None:
        """Archive the files among ``paths`` in one entry, unless these bytes already are."""
        todo = []
        for path in paths:
            check_path(str(path), where=str(path))
            current = _current_regular(path, self.become)
            if current is not None and self._kept.get(str(path)) != sha256_of(current):
                todo.append(path)
        entry = self.archive.put(
            todo,
            service=self.service,
            revision=self.revision,
            reason=reason,
            by_revision=self.by_revision,
            become=self.become,
        )
        if entry is not None and entry.index is not None:
            self._kept.update({f.path: f.sha256 for f in entry.index.files})
        return entry

    def keep_replaced(self, new: Mapping[Path, str | bytes]) -> Entry | None:
        """Archive, in one entry, those of the files that ``new`` would change."""
        changing = []
        for path, data in new.items():
            check_path(str(path), where=str(path))
            payload = data.encode("utf-8") if isinstance(data, str) else data
            current = _current_regular(path, self.become)
            if current is not None and current != payload:
                changing.append(path)
        return self.keep(changing, reason="replace")

    def replace(self, path: Path, data: str | bytes, *, mode: int) -> bool:
        """Write ``data`` to ``path`` (atomic, ``mode``), archiving other bytes found there."""
        self.keep_replaced({path: data})
        if not self.become.need(path):
            return write_if_changed(path, data, mode=mode)
        payload = data.encode("utf-8") if isinstance(data, str) else data
        if _current_regular(path, self.become) == payload:
            if stat.S_IMODE(path.stat().st_mode) != mode:
                self.become.chmod(path, mode)
            return False
        self.become.write(path, payload, mode=mode)  # sudo install + mv: still atomic
        return True

    def restore(self, entry: Entry, item: ArchivedFile) -> bool:
        """Put ``item`` of ``entry`` back at its path, byte for byte, with its mode.

        The copy is checked first (:meth:`Archive.stored`); other bytes found at
        the path are archived, as any replace does. Returns whether the file on
        the host changed; :meth:`restored` records it in the entry's index.
        """
        data = self.archive.stored(entry, item)
        return self.replace(Path(item.path), data, mode=item.mode & RESTORE_MODE_MASK)

    def restored(self, files: Iterable[tuple[str, str]]) -> None:
        """Record in each entry's index the files (entry name, path) put back from it:
        one restore per entry, by this apply."""
        by_entry: dict[str, list[str]] = {}
        for name, path in files:
            by_entry.setdefault(name, []).append(path)
        for name, paths in by_entry.items():
            self.archive.record_restore(name, paths, by="apply", by_revision=self.by_revision)

    def remove(self, path: Path) -> None:
        """Archive ``path`` (reason retire) unless already archived, then unlink it."""
        self.keep([path], reason="retire")
        self.become.remove(path)


def _writable(path: Path) -> bool:
    """Whether this user may create ``path`` (its nearest existing folder is writable)."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return os.access(folder, os.W_OK | os.X_OK)


def _current_regular(path: Path, become: Become = NO_BECOME) -> bytes | None:
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return None  # a symlink or a folder: no bytes of ours to keep (see put)
    except FileNotFoundError:
        return None
    return become.read(path)


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text)[:64] or "_"


def _tree_bytes(folder: Path) -> int:
    """The bytes of the files under ``folder`` (what deleting it frees, folders aside)."""
    total = 0
    for base, _dirs, files in os.walk(folder):  # does not follow symlinks
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(base, name)).st_size
    return total
