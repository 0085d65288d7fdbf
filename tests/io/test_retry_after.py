"""Hostile ``Retry-After`` headers: clamped, never a crash or an endless sleep.

A real HTTP server on loopback answers 503 with each bad header, then 200;
the real client, status mapper and retry loop (with real sleeps) must get
through in bounded time, every wait inside ``[0, cap]``.
"""

from __future__ import annotations

import email.utils
import math
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from inferfleet.io import http, http_errors
from inferfleet.io.retry import Retry, retrying

HOSTILE = [
    "-5",
    "-1e308",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "1e400",
    "99999999999999999999999",
    "soon",
    "",
    "   ",
    "Wed, 99 Foo 2026 99:99:99 GMT",
    "Mon, 01 Jan 0001 00:00:00 GMT",
    "Fri, 31 Dec 9999 23:59:59 GMT",
    "Tue, 15 Nov 1994 08:12:31",  # obsolete form without a zone
    "\x00\x01",
]


class _Busy(BaseHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:
        pass

    def do_GET(self) -> None:
        answers: list[str | None] = self.server.answers  # type: ignore[attr-defined]
        header = answers.pop(0) if answers else None
        if header is None:
            body = b"ok"
            self.send_response(200)
        else:
            body = b"busy"
            self.send_response(503)
            # Written raw: send_header would refuse nothing, but be explicit about the bytes.
            self.wfile.write(f"Retry-After: {header}\r\n".encode("latin-1"))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def busy() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    srv.daemon_threads = True
    srv.answers = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


ASKED = http_errors.Asked(subject="the file", url="http://127.0.0.1/f", token=None)


@pytest.mark.parametrize("header", HOSTILE)
def test_a_hostile_retry_after_is_clamped_by_the_real_retry_loop(
    busy: ThreadingHTTPServer, header: str
) -> None:
    busy.answers[:] = [header, header]  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{busy.server_address[1]}/f"
    policy = Retry(attempts=5, base=0.01, cap=0.2)
    waits: list[float] = []

    def once() -> str:
        with httpx.Client(timeout=5) as client:
            answer = http.send(client, "GET", url)
            http_errors.raise_for_status(answer, ASKED)
            return answer.text

    started = time.monotonic()
    got = retrying(once, policy=policy, on_retry=lambda _reason, delay: waits.append(delay))
    assert got == "ok"
    assert len(waits) == 2
    assert all(0.0 <= w <= policy.cap and not math.isnan(w) for w in waits), waits
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("7", 7.0),
        ("0", 0.0),
        ("-5", 0.0),
        ("NaN", None),
        ("inf", 60.0),
        ("-inf", 0.0),
        ("1e400", 60.0),
        ("garbage", None),
        ("Wed, 99 Foo 2026 99:99:99 GMT", None),
        ("", None),
    ],
)
def test_the_header_reader_clamps_to_zero_and_the_cap(raw: str, expected: float | None) -> None:
    assert http_errors.retry_after(raw) == expected


def test_a_date_is_read_relative_to_now_and_clamped() -> None:
    now = 1_800_000_000.0
    soon = email.utils.formatdate(now + 12, usegmt=True)
    past = email.utils.formatdate(now - 3600, usegmt=True)
    far = email.utils.formatdate(now + 86400 * 365, usegmt=True)
    assert http_errors.retry_after(soon, now=now) == 12.0
    assert http_errors.retry_after(past, now=now) == 0.0
    assert http_errors.retry_after(far, now=now) == 60.0


def test_the_policy_clamps_a_retry_after_built_by_anyone() -> None:
    policy = Retry(attempts=3, base=0.5, cap=2.0)
    assert policy.delay(1, -3.0) == 0.0
    assert policy.delay(1, math.inf) == 2.0
    assert policy.delay(1, math.nan) == 0.5  # NaN counts as not given: the backoff applies
    assert policy.delay(10_000, None) == 2.0  # no OverflowError from a long run of failures
