"""A Hub token goes only over https, or plain http to this machine.

``gguf inspect`` against real servers: one on loopback (a local mirror, the
bytes never leave the machine) gets the token; the same server on this
machine's LAN address, configured as ``HF_ENDPOINT`` over plain http, gets
none, and the header is still read.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psutil
import pytest
from fixtures.gguf_builder import gemma3_like

from inferfleet.io import token_scope

GGUF = gemma3_like().build(data=False)


class _Mirror(BaseHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(GGUF)))
        self.end_headers()
        self.wfile.write(GGUF)


def _lan_address() -> str | None:
    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return str(a.address)
    return None


@pytest.fixture(params=["loopback", "lan"])
def mirror(request: pytest.FixtureRequest) -> Iterator[tuple[str, ThreadingHTTPServer]]:
    address = "127.0.0.1" if request.param == "loopback" else _lan_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to serve on")
    srv = ThreadingHTTPServer((address, 0), _Mirror)
    srv.daemon_threads = True
    srv.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield request.param, srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def test_gguf_inspect_sends_the_token_only_where_plain_http_stays_on_this_machine(
    mirror: tuple[str, ThreadingHTTPServer], cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    where, srv = mirror
    host, port = srv.server_address[:2]
    endpoint = f"http://{host}:{port}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_TOKEN", "hf_" + "s" * 30)
    result = cli("gguf", "inspect", f"{endpoint}/o/r/resolve/main/m.gguf", "--json")
    # The header is read either way (the tensor data is not served: exit 1 says truncated).
    assert json.loads(result.stdout)["architecture"] == "gemma3", result.stderr
    seen = srv.seen  # type: ignore[attr-defined]
    assert seen
    if where == "loopback":
        assert set(seen) == {"Bearer hf_" + "s" * 30}
    else:
        assert set(seen) == {None}  # a LAN mirror over plain http: never the token


def test_the_rule_is_https_or_loopback_http() -> None:
    for url, endpoint in (
        ("http://10.0.0.5:8000/x", "http://10.0.0.5:8000"),
        ("http://mirror.lan/x", "http://mirror.lan"),
        ("ftp://127.0.0.1/x", "ftp://127.0.0.1"),
        ("http://huggingface.co/x", "https://huggingface.co"),
    ):
        assert not token_scope.may_send_token(url, endpoint=endpoint), url
    for url, endpoint in (
        ("https://mirror.lan/x", "https://mirror.lan"),
        ("http://127.0.0.1:8000/x", "http://127.0.0.1:8000"),
        ("http://localhost:8000/x", "http://localhost:8000"),
        ("http://[::1]:8000/x", "http://[::1]:8000"),
    ):
        assert token_scope.may_send_token(url, endpoint=endpoint), url
