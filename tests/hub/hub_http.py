"""The HTTP side shared by the test Hub's two hosts: answers, Range, faulty bodies."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

from hub_content import Logged, RepoFile

if TYPE_CHECKING:
    from hubserver import HubServer

_SLICE = 64 << 10


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        # A client that goes away (kill -9, a closed keep-alive) is normal here.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class Base(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    host_name = ""

    def setup(self) -> None:
        self.timeout = self.server.hub.idle_timeout  # type: ignore[attr-defined,misc]
        super().setup()

    @property
    def hub(self) -> HubServer:
        return self.server.hub  # type: ignore[attr-defined,no-any-return]

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
        self._handle(head=True)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._handle(head=False)

    def _handle(self, *, head: bool) -> None:
        entry = Logged(
            self.host_name,
            self.command,
            self.path,
            self.headers.get("Range"),
            self.headers.get("Authorization"),
        )
        self.hub._record(entry)
        self.head = head
        self.entry = entry
        try:
            self.route()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def route(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ answers
    def reply(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        content_type: str = "text/plain; charset=utf-8",
    ) -> None:
        self.entry.status = status
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not self.head:
            self.wfile.write(body)

    def reply_json(self, data: object, headers: dict[str, str] | None = None) -> None:
        self.reply(200, json.dumps(data).encode(), headers, "application/json")

    def error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self.reply(status, body, headers, "application/json")

    def token(self) -> str | None:
        value = self.headers.get("Authorization", "")
        return value[7:] if value.startswith("Bearer ") else None

    def serve_blob(
        self, item: RepoFile, etag: str, *, cdn: bool, extra: dict[str, str] | None = None
    ) -> None:
        """A file body with Range support and the configured faults; ``extra`` headers too."""
        hub = self.hub
        size = item.blob.size
        wanted = self.headers.get("Range")
        if cdn and wanted is not None and re.fullmatch(r"bytes=0-", wanted.strip()):
            # The Xet CDN refuses an open range from zero (L-03).
            self.reply(400, b"InvalidRange: bytes=0- is not accepted")
            return
        if cdn and hub._take("cdn_500", item.path):
            self.reply(500, b"Internal Server Error")
            return
        error = hub._take("cdn_error", item.path) if cdn else None
        if isinstance(error, tuple):
            self.reply(error[0], error[1])
            return
        wrong = hub._take("cdn_wrong_body", item.path) if cdn else None
        if isinstance(wrong, bytes):
            self.reply(200, wrong, {"ETag": f'"{etag}"'})
            return
        start, end = 0, size
        status = 200
        if wanted is not None and not (hub._take("ignore_range", item.path)):
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted.strip())
            if match is None or int(match[1]) >= size:
                self.reply(416, b"", {"Content-Range": f"bytes */{size}"})
                return
            start = int(match[1])
            end = min(size, int(match[2]) + 1) if match[2] else size
            status = 206
        self.entry.status = status
        self.send_response(status)
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{etag}"')
        self.send_header("Content-Type", "application/octet-stream")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if self.head:
            return
        drop = hub._take("drop_after", item.path)
        stall = hub._take("stall", item.path)
        flip = (start + end) // 2 if hub._take("corrupt", item.path) else None
        self.wfile.flush()
        self._send_range(item, start, end, drop, stall, flip)

    def _send_range(
        self,
        item: RepoFile,
        start: int,
        end: int,
        drop: object,
        stall: object,
        flip: int | None,
    ) -> None:
        hub = self.hub
        rate = hub.faults.rate
        limit = end if not isinstance(drop, int) else min(end, start + drop)
        stall_at = stall[0] + start if isinstance(stall, tuple) else None
        sock = self.connection
        began = time.monotonic()
        sent = 0
        pos = start
        for (lo, hi), segment in item.blob._spans(start, limit):
            at = lo
            while at < hi:
                step = hi - at if rate is None and flip is None and stall_at is None else _SLICE
                step = min(step, hi - at)
                here = pos
                hub.flowing.wait()  # a test holds every body here to read the socket queues
                # Counted before it leaves: a send cut short by a kill counts in full, so the
                # bytes a test sees "sent" are never fewer than what reached the client.
                hub._count(item.path, step)
                if stall_at is not None and here >= stall_at:
                    time.sleep(stall[1])  # type: ignore[index]
                    stall_at = None
                if isinstance(segment, bytes) or (flip is not None and here <= flip < here + step):
                    data = bytearray(
                        segment[at : at + step]
                        if isinstance(segment, bytes)
                        else _read(segment, at, step)
                    )
                    if flip is not None and here <= flip < here + step:
                        data[flip - here] ^= 0xFF
                    sock.sendall(data)
                    n = len(data)
                else:
                    # socket.sendfile waits on the socket's timeout; os.sendfile would not.
                    with segment[0].open("rb") as handle:
                        n = sock.sendfile(handle, segment[1] + at, step)
                    if n == 0:
                        raise BrokenPipeError
                hub._count(item.path, n - step)
                at += n
                pos += n
                sent += n
                if rate is not None:
                    ahead = sent / rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
        if limit < end:
            # Dropped mid-body: the client sees a short body and a closed connection.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            self.close_connection = True


_FDS: dict[Path, int] = {}
_FDS_LOCK = threading.Lock()


def _fd(path: Path) -> int:
    with _FDS_LOCK:
        if path not in _FDS:
            _FDS[path] = os.open(path, os.O_RDONLY)
        return _FDS[path]


def _read(segment: tuple[Path, int, int], at: int, n: int) -> bytes:
    return os.pread(_fd(segment[0]), n, segment[1] + at)
