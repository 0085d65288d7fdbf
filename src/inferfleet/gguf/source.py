"""Byte sources for the header reader: a local file, bytes, or an HTTP(S) URL.

The reader only ever extends one contiguous buffer from the start of the file,
so a source answers ``read(start, end)`` with ``start`` equal to what it has
already returned. That lets the HTTP source work both with servers that honour
``Range`` (one ranged request per read) and with those that ignore it
and stream the whole file (we read only as far as the header needs, then drop
the connection).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import httpx

from inferfleet.bounded import open_regular
from inferfleet.errors import HTTPError, RemoteNotFoundError
from inferfleet.gguf.errors import GGUFError, GGUFNotFound
from inferfleet.io import http, http_errors, token_scope
from inferfleet.io.retry import GaveUp, Retry, retrying

# A header read retries a busy server or a dropped connection a few times,
# with the same backoff as every other request (io/retry.py), but briefly:
# it is an interactive command.
HEADER_RETRY = Retry(attempts=3, base=0.25, cap=2.0)
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/")
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


class ByteSource(Protocol):
    """Sequential access to the first bytes of a GGUF file."""

    # Whether a read costs a round trip: the reader then reads further ahead
    # (a second request costs more than extra bytes); locally it reads close
    # to what the header needs.
    remote: bool

    @property
    def name(self) -> str:
        """The path or URL, for messages."""
        ...

    @property
    def size(self) -> int | None:
        """Total bytes of the file, once known (``None`` until then or never)."""
        ...

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``; fewer only at the end of the file."""
        ...

    def close(self) -> None: ...


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


class LocalSource:
    """A source on this machine, its size known when opened: a read costs no round trip."""

    remote = False

    def __init__(self, name: str, size: int) -> None:
        self._name = name
        self._size = size

    @property
    def name(self) -> str:
        return self._name

    @property
    def size(self) -> int:
        return self._size

    def close(self) -> None:
        return None


class BytesSource(LocalSource):
    """A GGUF already in memory (tests, or bytes from elsewhere)."""

    def __init__(self, data: bytes, name: str = "<bytes>") -> None:
        super().__init__(name, len(data))
        self._data = data

    def read(self, start: int, end: int) -> bytes:
        return self._data[start:end]


def _open_error(message: str, *, where: str, hint: str = "") -> GGUFError:
    return GGUFError(message, source=where, hint=hint or "name a .gguf file")


class FileSource(LocalSource):
    """A local file, read with ``pread``; its size comes from ``stat`` (L-08)."""

    def __init__(self, path: Path | str) -> None:
        self._path = Path(path)
        try:
            # Without blocking: a FIFO named as a model would wait for a writer forever.
            self._fd = open_regular(self._path, what="the model path", error=_open_error)
        except FileNotFoundError:
            raise GGUFNotFound("no such file", source=str(path), hint="check the path") from None
        super().__init__(str(self._path), os.fstat(self._fd).st_size)

    @property
    def path(self) -> Path:
        return self._path

    def read(self, start: int, end: int) -> bytes:
        parts: list[bytes] = []
        pos = start
        while pos < end:
            chunk = os.pread(self._fd, end - pos, pos)
            if not chunk:
                break
            parts.append(chunk)
            pos += len(chunk)
        return b"".join(parts)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class HTTPSource:
    """A GGUF at an HTTP(S) URL, read with as few round trips as possible.

    Each ``read`` is one ``Range`` request for exactly the bytes asked; the
    reader asks for 256 KiB first, then for the rest of the header as
    estimated from what those revealed (entry counts, the vocabulary's average
    entry length) with a margin, so a typical header costs two requests. A
    server that ignores ``Range`` (200) is read as a stream up to what is
    needed and then closed. ``requests`` counts the
    requests sent, redirects and retries included. Statuses become errors in
    :mod:`inferfleet.io.http_errors`, like every other HTTP caller's.
    """

    remote = True

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        endpoint: str | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self._url = url
        self._target = url  # after redirects: reused so later reads skip them
        self._token = token
        # The token goes only where io/token_scope allows, on every hop.
        self._endpoint = endpoint if endpoint is not None else token_scope.hub_endpoint()
        self._own_client = client is None
        self._client = client if client is not None else http_client()
        self._size: int | None = None
        self._stream: httpx.Response | None = None
        self._chunks: Iterator[bytes] | None = None
        self._pending = b""
        self._stream_pos = 0
        self.requests = 0

    @property
    def name(self) -> str:
        return self._url

    @property
    def size(self) -> int | None:
        return self._size

    def _headers(self, url: str, start: int, end: int) -> dict[str, str]:
        self.requests += 1  # asked once per hop
        headers = {"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}
        headers.update(token_scope.bearer(url, endpoint=self._endpoint, token=self._token))
        return headers

    def _asked(self, url: str) -> http_errors.Asked:
        hub_repo = _RESOLVE.match(urlsplit(url).path)
        on_hub = hub_repo is not None and token_scope.may_send_token(url, endpoint=self._endpoint)
        return http_errors.Asked(
            subject="the GGUF file",
            url=url,
            repo=hub_repo[1] if on_hub and hub_repo else None,
            endpoint=self._endpoint,
            token="HF_TOKEN" if self._token else None,
            token_options="export HF_TOKEN with a token that can read this repository",
            fix="check the URL; the server may not serve files",
        )

    def _open_once(self, start: int, end: int) -> httpx.Response:
        response = http.send(
            self._client,
            "GET",
            self._target,
            headers_for=lambda url: self._headers(url, start, end),
            stream=True,
        )
        if response.is_success or response.status_code == 416:
            return response
        try:
            http_errors.raise_for_status(response, self._asked(str(response.url)))
        finally:
            response.close()
        raise AssertionError("raise_for_status returned on an error status")

    def _open(self, start: int, end: int) -> httpx.Response:
        """A 2xx or 416 answer for bytes ``[start, end)``; the rest becomes a GGUFError."""
        try:
            response = retrying(lambda: self._open_once(start, end), policy=HEADER_RETRY)
        except GaveUp as spent:
            raise GGUFError(
                f"cannot fetch the header: {spent.last.message}",
                source=self._url,
                hint="check the URL, the network and any proxy (HTTPS_PROXY / NO_PROXY)",
            ) from None
        except RemoteNotFoundError as exc:
            raise GGUFNotFound(exc.message, source=self._url, hint=exc.hint) from None
        except HTTPError as exc:
            raise GGUFError(exc.message, source=self._url, hint=exc.hint) from None
        self._target = str(response.url)
        return response

    def read(self, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        if self._chunks is not None:
            return self._read_stream(start, end)
        response = self._open(start, end)
        status = response.status_code
        if status == 416:  # asked past the end: the file is shorter than start
            response.close()
            return b""
        if status == 206:
            match = _CONTENT_RANGE.match(response.headers.get("content-range", ""))
            if match is None or int(match.group(1)) != start:
                response.close()
                raise GGUFError(
                    f"asked for bytes {start}-{end - 1}, the server answered "
                    f"{response.headers.get('content-range', 'no Content-Range')!r}",
                    source=self._url,
                )
            if match.group(3) != "*":
                self._size = int(match.group(3))
            try:
                # Never trust the server to send only what was asked.
                return self._take(response.iter_bytes(), end - start, keep_rest=False)
            finally:
                response.close()
        if status == 200:
            # Range ignored: the body is the whole file. Keep the stream and
            # read from it only as far as the header needs.
            if "content-length" in response.headers and "content-encoding" not in response.headers:
                self._size = int(response.headers["content-length"])
            self._stream = response
            self._chunks = response.iter_bytes()
            return self._read_stream(start, end)
        response.close()
        raise GGUFError(f"unexpected HTTP {status} while reading the header", source=self._url)

    def _take(self, chunks: Iterator[bytes], n: int, *, keep_rest: bool) -> bytes:
        """Up to ``n`` bytes from ``chunks``; with ``keep_rest`` the surplus of
        the last chunk is kept for the next call (stream mode)."""
        parts = [self._pending] if self._pending else []
        have = len(self._pending)
        self._pending = b""
        while have < n:
            try:
                chunk = next(chunks)
            except StopIteration:
                break
            except httpx.HTTPError as exc:
                raise GGUFError(f"connection failed mid-header: {exc}", source=self._url) from None
            parts.append(chunk)
            have += len(chunk)
        data = b"".join(parts)
        if len(data) > n:
            data, rest = data[:n], data[n:]
            if keep_rest:
                self._pending = rest
        return data

    def _read_stream(self, start: int, end: int) -> bytes:
        assert self._chunks is not None
        if start > self._stream_pos:  # skip what the reader does not need
            self._take(self._chunks, start - self._stream_pos, keep_rest=True)
            self._stream_pos = start
        data = self._take(self._chunks, end - start, keep_rest=True)
        self._stream_pos += len(data)
        if len(data) < end - start and self._size is None:
            self._size = self._stream_pos  # the stream ended: now we know
        return data

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()  # drops the connection: the rest is never read
            self._stream = None
            self._chunks = None
        if self._own_client:
            self._client.close()


def hf_token_for(url: str) -> str | None:
    """``HF_TOKEN`` if a Hub token may go to ``url`` (:mod:`inferfleet.io.token_scope`)."""
    if token_scope.may_send_token(url, endpoint=token_scope.hub_endpoint()):
        return os.environ.get("HF_TOKEN") or None
    return None


def http_client() -> httpx.Client:
    """The client for header reads; one is shared by the parts of a split GGUF."""
    return http.client(purpose="remote", timeout=30.0)


def open_source(location: str | Path, *, client: httpx.Client | None = None) -> ByteSource:
    """A source for a path or an ``http(s)://`` URL."""
    text = str(location)
    if is_url(text):
        return HTTPSource(text, token=hf_token_for(text), client=client)
    return FileSource(Path(text).expanduser())
