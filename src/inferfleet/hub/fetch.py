"""Fetch a declared file set: in parallel, resumable, verified, assembled.

Exactly the declared files are fetched (L-09), several at a time. Files
the verification record vouches for are skipped without reading them; a
file already in place is hashed once instead of downloaded. ``.partNofM``
fragments are verified one by one, then concatenated in numeric order into
the file they are cut from, hashing while copying (L-05); split GGUF parts
are ordinary files here and are never concatenated (L-04).

Before the first request the free space is checked against what is left
to fetch. A 401/403/gated answer stops the whole fetch at once (L-07: the
next file would get the same answer); any other failure is reported per
file while the other files complete.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from inferfleet.artifacts.digests import file_digests
from inferfleet.artifacts.record import Record
from inferfleet.errors import AuthError, FleetError
from inferfleet.fleetfile.quantities import format_size
from inferfleet.hub.auth import Token
from inferfleet.hub.download import (
    Cancelled,
    Events,
    Outcome,
    Retry,
    Session,
    Target,
    download,
    partial_path,
)
from inferfleet.hub.errors import FetchError, FetchFailures, IntegrityError, NoSpaceError
from inferfleet.io import http
from inferfleet.io.files import atomic_writer
from inferfleet.io.locks import FileLock

MAX_JOBS = 32
_COPY_BLOCK = 8 << 20


@dataclass(frozen=True)
class Assembly:
    """A file concatenated from ``.partNofM`` fragments, in numeric order (L-05)."""

    path: str
    size: int
    sha256: str | None
    fragments: tuple[str, ...]


@dataclass(frozen=True)
class FetchJob:
    endpoint: str
    repo: str
    revision: str  # a commit sha, so every file comes from one snapshot
    folder: Path
    targets: tuple[Target, ...]
    assemblies: tuple[Assembly, ...] = ()


@dataclass
class FetchReport:
    outcomes: list[Outcome] = field(default_factory=list)
    failures: list[tuple[str, FleetError]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def fetched(self) -> int:
        return sum(o.fetched for o in self.outcomes)

    @property
    def reused(self) -> int:
        return sum(o.reused for o in self.outcomes)

    def raise_for_failures(self) -> None:
        if len(self.failures) == 1:
            raise self.failures[0][1]
        if self.failures:
            raise FetchFailures(self.failures, fetched=len(self.outcomes))


class NullEvents:
    def started(self, path: str, size: int) -> None:
        pass

    def resumed(self, path: str, have: int) -> None:
        pass

    def finished(self, path: str, status: str) -> None:
        pass

    def advanced(self, path: str, count: int, *, fetched: bool) -> None:
        pass

    def restarted(self, path: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass


def fetch(
    job: FetchJob,
    *,
    token: Token | None,
    jobs: int = 4,
    retry: Retry | None = None,
    stall_timeout: float = 60.0,
    events: Events | None = None,
) -> FetchReport:
    """Make every declared file present and verified in ``job.folder``.

    Raises :class:`AuthError` (gate, token) at once; other per-file failures
    are in the report (``raise_for_failures``). Ctrl-C keeps the partials.
    """
    began = time.monotonic()
    events = events or NullEvents()
    jobs = max(1, min(jobs, MAX_JOBS))
    job.folder.mkdir(parents=True, exist_ok=True)
    report = FetchReport()
    with (
        _exclusive(job.folder, f"fetch of {job.repo}"),
        http.client(purpose="remote", timeout=stall_timeout) as client,
    ):
        record = Record(job.folder)
        vouched = {t.path for t in job.targets if _vouched(job.folder, record, t)}
        check_free_space(job, vouched, record)
        session = Session(
            client=client,
            endpoint=job.endpoint,
            repo=job.repo,
            revision=job.revision,
            token=token,
            folder=job.folder,
            retry=retry or Retry(),
            events=events,
            cancel=threading.Event(),
        )
        _run_pool(session, job, vouched, record, jobs, report)
        done = {o.path for o in report.outcomes}
        for assembly in job.assemblies:
            if all(name in done for name in assembly.fragments):
                try:
                    outcome = _assemble(job.folder, assembly, record, events)
                except FleetError as exc:
                    report.failures.append((assembly.path, exc))
                    continue
                report.outcomes.append(outcome)
                events.finished(assembly.path, outcome.status)
    report.seconds = time.monotonic() - began
    return report


def _run_pool(
    session: Session,
    job: FetchJob,
    vouched: set[str],
    record: Record,
    jobs: int,
    report: FetchReport,
) -> None:
    # Largest first: the long downloads start at once and small ones fill the gaps.
    ordered = sorted(job.targets, key=lambda t: t.size, reverse=True)
    fatal: BaseException | None = None
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="inferfleet-fetch") as pool:
        futures: dict[Future[Outcome], Target] = {
            pool.submit(_one, session, t, t.path in vouched, record): t for t in ordered
        }
        pending = set(futures)
        try:
            while pending:
                finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for future in finished:
                    target = futures[future]
                    try:
                        outcome = future.result()
                    except Cancelled:
                        continue
                    except AuthError as exc:
                        # L-07: the same token gets the same answer for every file.
                        session.cancel.set()
                        fatal = fatal or exc
                        continue
                    except FleetError as exc:
                        report.failures.append((target.path, exc))
                        continue
                    except BaseException as exc:
                        session.cancel.set()
                        fatal = fatal or exc
                        continue
                    report.outcomes.append(outcome)
                    _remember(job.folder, record, target, outcome)
                    session.events.finished(target.path, outcome.status)
        except KeyboardInterrupt:
            session.cancel.set()
            wait(pending)
            kept = sum(_partial_size(job.folder, t) for t in job.targets)
            session.events.note(
                f"interrupted: {format_size(kept)} kept in partial files; run the same "
                "command again to resume (verified files are not fetched again)"
            )
            raise
    if fatal is not None:
        raise fatal


def _one(session: Session, target: Target, vouched: bool, record: Record) -> Outcome:
    if session.cancel.is_set():
        raise Cancelled
    try:
        return _one_file(session, target, vouched, record)
    except AuthError:
        # Stop the other workers before they ask too (L-07).
        session.cancel.set()
        raise


def _one_file(session: Session, target: Target, vouched: bool, record: Record) -> Outcome:
    final = session.folder / target.path
    if vouched:
        # The record vouches for it (stat key unchanged): not even read (L-08).
        session.events.started(target.path, target.size)
        return Outcome(target.path, "present", target.size, 0, 0, 0.0, None, None)
    try:
        st = final.stat()
    except FileNotFoundError:
        return download(session, target)
    if st.st_size == target.size:
        began = time.monotonic()
        session.events.started(target.path, target.size)
        digests = file_digests(
            final,
            size=target.size,
            git=target.gitsha1 is not None,
            on_bytes=lambda n: session.events.advanced(target.path, n, fetched=False),
        )
        if (target.sha256 in (None, digests.sha256)) and (
            target.gitsha1 in (None, digests.gitsha1)
        ):
            return Outcome(
                target.path,
                "present",
                target.size,
                0,
                target.size,
                time.monotonic() - began,
                digests.sha256,
                digests.gitsha1 or None,
            )
        session.events.restarted(target.path)
    # A file of the wrong size or hash is replaced only once the right one is verified.
    session.events.note(f"{target.path}: the file in place is not the declared one; fetching")
    return download(session, target)


def _vouched(folder: Path, record: Record, target: Target) -> bool:
    try:
        st = (folder / target.path).stat()
    except FileNotFoundError:
        return False
    if st.st_size != target.size:
        return False
    if target.sha256 is None and target.gitsha1 is None:
        return True  # size-only: stat is the whole check
    return record.vouches(target.path, st, sha256=target.sha256, gitsha1=target.gitsha1)


def _remember(folder: Path, record: Record, target: Target, outcome: Outcome) -> None:
    if outcome.sha256 is None and outcome.gitsha1 is None:
        return  # vouched already, nothing new learned
    st = (folder / target.path).stat()
    record.put(
        target.path,
        st,
        sha256=outcome.sha256,
        gitsha1=outcome.gitsha1 if target.gitsha1 is not None else None,
    )


def check_free_space(job: FetchJob, vouched: set[str], record: Record) -> None:
    """Refuse to start when what is left to fetch cannot fit."""
    needed = 0
    for target in job.targets:
        if target.path not in vouched:
            needed += max(0, target.size - _partial_size(job.folder, target))
    for assembly in job.assemblies:
        final = job.folder / assembly.path
        if not (final.exists() and final.stat().st_size == assembly.size):
            needed += assembly.size
    free = shutil.disk_usage(job.folder).free
    if needed > free:
        raise NoSpaceError(
            f"{job.folder}: {format_size(needed)} left to fetch, {format_size(free)} free",
            hint="free some space or point the model's dir: at a bigger disk; nothing was "
            "downloaded",
            where=str(job.folder),
        )


def _partial_size(folder: Path, target: Target) -> int:
    try:
        return partial_path(folder, target).stat().st_size
    except FileNotFoundError:
        return 0


def _assemble(folder: Path, assembly: Assembly, record: Record, events: Events) -> Outcome:
    """Concatenate verified fragments in numeric order; verify the whole if a hash is known."""
    final = folder / assembly.path
    began = time.monotonic()
    with contextlib.suppress(FileNotFoundError):
        st = final.stat()
        known = record.known_sha256(assembly.path, st)
        if st.st_size == assembly.size and known is not None and assembly.sha256 in (None, known):
            # Assembled and hashed by an earlier run, unchanged since.
            events.started(assembly.path, assembly.size)
            return Outcome(assembly.path, "present", assembly.size, 0, 0, 0.0, None, None)
    events.started(assembly.path, assembly.size)
    digest = hashlib.sha256()
    # The whole file appears under its name only once its size and hash are right.
    with atomic_writer(final) as out:
        for name in assembly.fragments:
            with (folder / name).open("rb") as part:
                while block := part.read(_COPY_BLOCK):
                    digest.update(block)
                    out.write(block)
                    events.advanced(assembly.path, len(block), fetched=False)
        size = out.tell()
        if size != assembly.size:
            raise IntegrityError(
                f"{assembly.path}: the fragments add up to {size:,} bytes, "
                f"{assembly.size:,} declared",
                hint="the manifest's parts line does not match its fragments: regenerate it",
            )
        if assembly.sha256 is not None and digest.hexdigest() != assembly.sha256:
            raise IntegrityError(
                f"{assembly.path}: the concatenated fragments have sha256 {digest.hexdigest()}, "
                f"declared {assembly.sha256}",
                hint="each fragment matched its own hash, so the declared whole-file hash is "
                "wrong or for another file: check it against the publisher's",
            )
    st = final.stat()
    record.put(assembly.path, st, sha256=digest.hexdigest(), gitsha1=None)
    return Outcome(
        assembly.path,
        "assembled",
        assembly.size,
        0,
        0,
        time.monotonic() - began,
        digest.hexdigest(),
        None,
    )


class _FetchLock(FileLock):
    """One fetch per model dir at a time; the kernel drops the lock when we die."""

    subject_kind = "model dir"
    error = FetchError


@contextlib.contextmanager
def _exclusive(folder: Path, what: str) -> Iterator[None]:
    with _FetchLock(folder / ".inferfleet-fetch.lock", str(folder)) as lock:
        lock.acquire(what)
        yield
