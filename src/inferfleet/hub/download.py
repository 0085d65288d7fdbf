"""One file, downloaded once: resumable, hashed while it streams, renamed when right.

The bytes go to ``<file>.<tag>.partial`` next to the target (``tag`` names
the expected content, so a partial of another revision is never resumed).
Each piece is written as it arrives and hashed in a thread of its own, in
large batches (:mod:`~inferfleet.hub.sink`): at most :data:`CHUNK` bytes
are ever received but not yet written, so a ``kill -9`` loses at most that
tail. A new run re-hashes the prefix on disk
and asks for the rest with ``Range: bytes=N-``; a fresh file gets no Range
header at all (L-03). A ``200`` answered to a Range request restarts the
file from the body in hand. The partial is renamed to the target only after
its size and hash match (L-01); wrong bytes are deleted, fetched once more
from zero, and never kept.
"""

from __future__ import annotations

import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx

from inferfleet.errors import TransientError
from inferfleet.hub import wire
from inferfleet.hub.auth import Token
from inferfleet.hub.errors import FetchError, IntegrityError
from inferfleet.hub.sink import CHUNK, Cancelled, Sink
from inferfleet.io.files import promote
from inferfleet.io.retry import Attempts, GaveUp, Retry

__all__ = ["CHUNK", "Cancelled", "Events", "Outcome", "Retry", "Session", "Target", "download"]

_REPORT = 1 << 20  # progress granularity: one event per MiB on disk, the rest at the end
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


@dataclass(frozen=True)
class Target:
    path: str
    size: int
    sha256: str | None = None
    gitsha1: str | None = None  # git blob id of a non-LFS file

    @property
    def tag(self) -> str:
        return (self.sha256 or self.gitsha1 or f"size{self.size}")[:16]


@dataclass(frozen=True)
class Outcome:
    path: str
    status: str  # downloaded | resumed | present
    size: int
    fetched: int  # bytes that came over the network
    reused: int  # bytes of an earlier partial, re-hashed locally
    seconds: float
    sha256: str | None
    gitsha1: str | None


class Events(Protocol):
    """What a fetch reports while it runs (called from worker threads)."""

    def started(self, path: str, size: int) -> None: ...
    def resumed(self, path: str, have: int) -> None: ...
    def advanced(self, path: str, count: int, *, fetched: bool) -> None: ...
    def restarted(self, path: str) -> None: ...
    def finished(self, path: str, status: str) -> None: ...
    def note(self, text: str) -> None: ...


@dataclass
class Session:
    """What every download of one fetch shares."""

    client: httpx.Client
    endpoint: str
    repo: str
    revision: str
    token: Token | None
    folder: Path
    retry: Retry
    events: Events
    cancel: threading.Event


def partial_path(folder: Path, target: Target) -> Path:
    final = folder / target.path
    return final.with_name(f"{final.name}.{target.tag}.partial")


def download(session: Session, target: Target) -> Outcome:
    """Fetch one file into ``session.folder``; return when it is verified and renamed."""
    began = time.monotonic()
    final = session.folder / target.path
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_path(session.folder, target)
    have = partial.stat().st_size if partial.exists() else 0
    if have > target.size:
        partial.unlink()
        have = 0
    session.events.started(target.path, target.size)
    if have:
        session.events.resumed(target.path, have)
    sink = Sink(partial, size=target.size, git=target.gitsha1 is not None, start=have)
    fetched = 0
    second_chance = True
    try:
        sink.rehash(
            cancelled=session.cancel.is_set,
            on_bytes=lambda n: session.events.advanced(target.path, n, fetched=False),
        )
        while True:
            if sink.received < target.size:
                fetched += _until_complete(session, target, sink)
                continue
            sink.sync()
            problem = _check(target, sink)
            if problem is None:
                sink.close()
                promote(partial, final)
                digests = sink.digests()
                return Outcome(
                    target.path,
                    "resumed" if have else "downloaded",
                    target.size,
                    fetched,
                    have,
                    time.monotonic() - began,
                    digests.sha256,
                    digests.gitsha1 or None,
                )
            sink.reset()  # the wrong bytes are gone before anything else happens
            if not second_chance:
                raise IntegrityError(
                    f"{target.path}: {problem}, twice; the bad bytes were deleted",
                    hint="the server or a proxy on the way serves wrong bytes: try "
                    "another endpoint (HF_ENDPOINT) or later. Nothing was marked verified.",
                    where=session.endpoint,
                )
            second_chance = False
            session.events.note(f"{target.path}: {problem}; deleted, fetching it again")
            session.events.restarted(target.path)
    finally:
        sink.close()
        if partial.exists() and partial.stat().st_size == 0:
            partial.unlink()


def _check(target: Target, sink: Sink) -> str | None:
    size = sink.path.stat().st_size
    if size != target.size:
        return f"{size:,} bytes on disk, {target.size:,} declared"
    digests = sink.digests()
    if target.sha256 is not None and digests.sha256 != target.sha256:
        return f"sha256 is {digests.sha256}, declared {target.sha256}"
    if target.gitsha1 is not None and digests.gitsha1 != target.gitsha1:
        return f"git blob id is {digests.gitsha1}, declared {target.gitsha1}"
    return None


def _until_complete(session: Session, target: Target, sink: Sink) -> int:
    """Requests, with bounded backoff, until every byte is on disk; returns bytes fetched."""
    attempts = Attempts(session.retry)
    fetched = 0
    while sink.received < target.size:
        if session.cancel.is_set():
            raise Cancelled
        before = sink.received
        got = [0]
        try:
            _one_request(session, target, sink, got)
            fetched += got[0]
            continue
        except TransientError as exc:
            reason = exc
        fetched += got[0]
        if sink.received > before:
            attempts.progressed()  # bytes arrived: the next failure starts a new count
        try:
            delay = attempts.failed(reason)
        except GaveUp as spent:
            raise FetchError(
                f"{target.path}: gave up after {spent.failures} attempts in a row without a "
                f"new byte; last error: {reason.message}",
                hint="run the same command again later: it resumes where it stopped",
                where=session.endpoint,
            ) from None
        session.events.note(f"{target.path}: {reason.message}; retrying in {delay:.1f} s")
        if session.cancel.wait(delay):
            raise Cancelled
    return fetched


def _one_request(session: Session, target: Target, sink: Sink, got: list[int]) -> None:
    """One GET from ``sink.received`` to the end, or a Transient with the bytes kept."""
    start = sink.received
    response = wire.open_stream(
        session.client,
        wire.HubFile(session.endpoint, session.repo, session.revision, target.path, session.token),
        start=start,
        check_first=lambda first: _check_first_answer(session, target, first),
    )
    unreported = 0  # bytes on disk not yet reported: progress is told per MiB, exactly

    def wrote(count: int) -> None:
        nonlocal unreported
        got[0] += count
        unreported += count
        if unreported >= _REPORT:
            session.events.advanced(target.path, unreported, fetched=True)
            unreported = 0
        if session.cancel.is_set() and sink.received < target.size:
            raise Cancelled

    try:
        offset = _body_offset(response, target, start)
        if offset == 0 and start > 0:
            # 200 to a Range request: the whole file is coming; start over with it.
            sink.reset()
            session.events.restarted(target.path)
        direct = _direct_socket(response, target.size - offset)
        # Held, not a temporary: a closed generator would close the connection.
        pieces = response.iter_raw()
        for piece in pieces:
            if sink.received + len(piece) > target.size:
                sink.reset()
                raise IntegrityError(
                    f"{target.path}: the server sent more than the declared "
                    f"{target.size:,} bytes; they were deleted",
                    hint="the endpoint serves another file under this name: regenerate the "
                    "manifest or use another endpoint. Nothing was marked verified.",
                    where=str(response.url),
                )
            sink.feed(piece)
            wrote(len(piece))
            if direct is not None:
                break  # h11's buffer is empty now: the rest comes from the socket
        if direct is not None:
            _read_direct(session, direct, target, sink, wrote, str(response.url))
        if sink.received < target.size:
            raise TransientError(
                f"connection closed at byte {sink.received:,}", where=str(response.url)
            )
    except httpx.TransportError as exc:
        raise TransientError(f"{type(exc).__name__}: {exc}", where=str(response.url)) from exc
    finally:
        response.close()  # a body read past httpx leaves the connection closed, never reused
        if unreported:
            session.events.advanced(target.path, unreported, fetched=True)
        sink.flush()


def _direct_socket(response: httpx.Response, length: int) -> socket.socket | None:
    """The connection's socket, when the rest of the body can be read from it directly.

    httpx reads 64 KiB at a time through h11, which copies every piece twice
    and costs about 1 s of CPU per GiB on top of the kernel's copy (measured
    by benchmarks/fetch_verify.py); ``recv_into`` a 1 MiB buffer costs 0.45 s.
    After the first piece of the body h11 holds no unread byte (its
    Content-Length reader hands over all it has buffered, every time), so the
    rest of the body is the socket's next bytes. Only for a plain body of a
    declared length on a plain or TLS socket (httpcore's documented
    ``network_stream`` extension); a chunked, encoded or tunnelled-TLS answer
    stays on httpx. Whatever path the bytes take, size and hash are checked
    before the file is kept (L-01).
    """
    if wire.content_length(response) != length:
        return None
    headers = response.headers
    if "transfer-encoding" in headers or headers.get("content-encoding", "identity") != "identity":
        return None
    stream = response.extensions.get("network_stream")
    if stream is None:
        return None
    sock = stream.get_extra_info("socket")
    if isinstance(sock, ssl.SSLSocket):
        return sock
    if isinstance(sock, socket.socket) and stream.get_extra_info("ssl_object") is None:
        return sock
    return None


def _read_direct(
    session: Session,
    sock: socket.socket,
    target: Target,
    sink: Sink,
    wrote: Callable[[int], None],
    url: str,
) -> None:
    """Read the rest of the body from ``sock`` into the sink's buffers, 1 MiB at a time."""
    timeout = session.client.timeout.read
    try:
        sock.settimeout(timeout)
        while sink.received < target.size:
            count = sink.fill(sock.recv_into, target.size - sink.received)
            if count == 0:
                return  # closed early: the caller reports it as transient
            wrote(count)
    except TimeoutError as exc:
        raise TransientError(f"no byte for {timeout} s", where=url) from exc
    except OSError as exc:
        raise TransientError(f"{type(exc).__name__}: {exc}", where=url) from exc


def _check_first_answer(session: Session, target: Target, first: wire.Linked) -> None:
    """The resolve's own headers must describe the declared file (L-02, L-09)."""
    changed = first.size is not None and first.size != target.size
    changed = changed or (
        first.sha256 is not None and target.sha256 is not None and first.sha256 != target.sha256
    )
    if changed:
        size = "?" if first.size is None else f"{first.size:,}"
        raise FetchError(
            f"{target.path}: upstream now serves {size} bytes with sha256 "
            f"{first.sha256} at {session.revision}; the manifest declares "
            f"{target.size:,} bytes, {target.sha256}",
            hint="pin a commit sha (revision:) and regenerate the manifest with "
            "`inferfleet models manifest`; nothing was downloaded",
            where=session.endpoint,
        )


def _body_offset(response: httpx.Response, target: Target, start: int) -> int:
    """Where the body starts in the file: ``start`` for a fitting 206, 0 for a 200."""
    length = wire.content_length(response)
    if response.status_code == 206:
        match = _CONTENT_RANGE.match(response.headers.get("content-range", "").strip())
        if match is None or int(match[1]) != start or int(match[2]) != target.size - 1:
            raise IntegrityError(
                f"{target.path}: asked for bytes {start}- and got "
                f"{response.headers.get('content-range')!r}",
                hint="the endpoint's Range support is broken; try another endpoint",
                where=str(response.url),
            )
        if match[3] != "*" and int(match[3]) != target.size:
            raise _declared_size_error(target, int(match[3]), response)
        return start
    if response.status_code == 200:
        if length is not None and length != target.size:
            # An error page with a 200, or another file: never write it (L-01).
            raise _declared_size_error(target, length, response)
        return 0
    raise FetchError(
        f"{target.path}: unexpected HTTP {response.status_code} for a download",
        hint="use an endpoint that speaks the Hub's API (HF_ENDPOINT / --endpoint)",
        where=str(response.url),
    )


def _declared_size_error(target: Target, size: int, response: httpx.Response) -> IntegrityError:
    return IntegrityError(
        f"{target.path}: the server answers {size:,} bytes, the manifest declares "
        f"{target.size:,}; nothing was written",
        hint="an error page or another file is being served: check the endpoint and the "
        "token, or regenerate the manifest",
        where=str(response.url),
    )
