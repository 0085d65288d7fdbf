"""The streaming client against a real HTTP server on loopback (no model needed).

The server writes events with pauses between them, so arrival stamps can be
checked; it can also answer an error, or drop an idle keep-alive connection
the way llama.cpp's HTTP server does.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from inferfleet.client.stream import request_body, stream
from inferfleet.io import http

SEEN: list[dict[str, Any]] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    served = 0  # requests on this connection (one handler per connection)

    def log_message(self, *_args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers["Content-Length"])
        body = json.loads(self.rfile.read(length))
        SEEN.append({"body": body, "headers": dict(self.headers)})
        self.served += 1
        if self.path == "/flaky" and self.served == 2:
            # The request arrived on a kept-alive connection the server has given up on:
            # it is closed without a word, as llama.cpp's HTTP server does after its timeout.
            self.close_connection = True
            return
        if self.path == "/error":
            payload = b'{"error":{"code":400,"type":"exceed_context_size_error"}}'
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Server-Timing", "prefill;dur=12.5")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = [{"choices": [{"text": f"t{i}", "index": 0}]} for i in range(3)]
        events.append({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}})
        for event in events:
            self._chunk(f"data: {json.dumps(event)}\n\n".encode())
            time.sleep(0.05)
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


@pytest.fixture
def base_url() -> Iterator[str]:
    SEEN.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_events_are_stamped_as_they_arrive(base_url: str) -> None:
    body = request_body("completions", model="m", text="hello", max_tokens=3)
    with http.client(timeout=10.0, base_url=base_url) as client:
        result = stream(client, "/v1/completions", body)
    assert result.status == 200 and result.error is None and result.saw_done
    assert [c.data.get("usage") for c in result.chunks][-1] == {
        "prompt_tokens": 5,
        "completion_tokens": 3,
    }
    gaps = [
        (b.arrived_ns - a.arrived_ns) / 1e6
        for a, b in zip(result.chunks, result.chunks[1:], strict=False)
    ]
    assert all(gap >= 40 for gap in gaps), gaps  # each read stamped on arrival, not at the end
    assert result.server_timing == ["prefill;dur=12.5"]
    sent = SEEN[0]
    assert sent["body"]["stream_options"] == {"include_usage": True}
    assert sent["body"]["ignore_eos"] is True and sent["body"]["stream"] is True
    assert sent["headers"]["Accept-Encoding"] == "identity"


def test_an_error_answer_keeps_the_body(base_url: str) -> None:
    with http.client(timeout=10.0, base_url=base_url) as client:
        result = stream(client, "/error", {"model": "m"})
    assert result.status == 400 and result.error == "HTTP 400"
    assert "exceed_context_size_error" in result.error_body and result.chunks == []


def test_a_dropped_idle_connection_is_retried_once(base_url: str) -> None:
    body = request_body("completions", model="m", text="hello", max_tokens=3)
    with http.client(timeout=10.0, base_url=base_url) as client:
        first = stream(client, "/flaky", body)
        second = stream(client, "/flaky", body)
    assert first.retries == 0 and first.saw_done
    assert second.status == 200 and second.saw_done and second.error is None
    assert second.retries == 1 and len(SEEN) == 3  # the dropped one, then the resend


def test_nobody_listening_is_an_error_not_an_exception() -> None:
    from helpers import free_port

    with http.client(timeout=5.0, base_url=f"http://127.0.0.1:{free_port()}") as client:
        result = stream(client, "/v1/completions", {"model": "m"})
    assert result.status is None and (result.error or "").startswith("ConnectError")
