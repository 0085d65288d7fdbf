"""Proxy and CA environment, by purpose, against a real forward proxy and a real TLS server.

Requests to the Hub and other remote URLs go through ``HTTP_PROXY`` /
``HTTPS_PROXY`` (unless ``NO_PROXY`` says otherwise) and trust
``SSL_CERT_FILE`` / ``REQUESTS_CA_BUNDLE``, as huggingface_hub does; requests
to fleet endpoints never go through a proxy (io/http.py).
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import certifi
import httpx
import pytest
from fixtures.gguf_builder import gemma3_like

from inferfleet.backends.health import probe as health_probe
from inferfleet.errors import TransientError
from inferfleet.gguf import read_header
from inferfleet.gguf.source import open_source
from inferfleet.hub import wire
from inferfleet.io import http

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
CA_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
GGUF = gemma3_like().build()
SHA = "a" * 64


class _Origin(BaseHTTPRequestHandler):
    """A tiny Hub: a GGUF file, an LFS-style resolve redirect, a health check."""

    def log_message(self, *_args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        if self.path.startswith("/org/repo/resolve/"):
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:9/cdn/blob")
            self.send_header("X-Linked-Size", "1234")
            self.send_header("X-Linked-Etag", f'"{SHA}"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        if self.path == "/health":
            body = b"{}"
        elif self.path == "/m.gguf":
            body = GGUF
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _ForwardProxy(BaseHTTPRequestHandler):
    """A plain-HTTP forward proxy: takes absolute-form requests and relays them."""

    def log_message(self, *_args: object) -> None:
        pass

    def _relay(self) -> None:
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        if not self.path.startswith("http://"):
            self.send_error(400, "not a proxy request")
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() != "proxy-connection"}
        with httpx.Client(trust_env=False) as direct:
            answer = direct.request(self.command, self.path, headers=headers)
        self.send_response(answer.status_code)
        for name, value in answer.headers.items():
            if name.lower() not in {"transfer-encoding", "connection", "content-length"}:
                self.send_header(name, value)
        body = b"" if self.command == "HEAD" else answer.content
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Via", "1.1 test-proxy")
        self.end_headers()
        self.wfile.write(body)

    do_GET = _relay
    do_HEAD = _relay


def _serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, threading.Thread]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture
def origin() -> Iterator[ThreadingHTTPServer]:
    server, thread = _serve(_Origin)
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def proxy() -> Iterator[ThreadingHTTPServer]:
    server, thread = _serve(_ForwardProxy)
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*PROXY_VARS, *CA_VARS):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return monkeypatch


def _url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_hub_requests_go_through_the_proxy_fleet_requests_never(
    origin: ThreadingHTTPServer, proxy: ThreadingHTTPServer, clean_env: pytest.MonkeyPatch
) -> None:
    clean_env.setenv("HTTP_PROXY", _url(proxy))
    base = _url(origin)
    # The Hub's resolve HEAD (manifests, fetch) through a remote client: via the proxy,
    # and the LFS redirect's own headers still come back (L-02).
    with http.client(purpose="remote") as remote:
        found = wire.probe(remote, wire.HubFile(base, "org/repo", "main", "m.gguf", None))
    assert (found.size, found.sha256) == (1234, SHA)
    # A GGUF header read from a URL builds its own remote client: via the proxy too.
    source = open_source(f"{base}/m.gguf")
    try:
        assert read_header(source).metadata["general.architecture"] == "gemma3"
    finally:
        source.close()
    assert proxy.seen == [  # type: ignore[attr-defined]
        f"{base}/org/repo/resolve/main/m.gguf",
        f"{base}/m.gguf",
    ]
    # A fleet endpoint's health check goes straight to it, proxy or not.
    proxy.seen.clear()  # type: ignore[attr-defined]
    with http.client(purpose="fleet") as fleet:
        assert health_probe(fleet, f"{base}/health").state == "ok"
    assert proxy.seen == []  # type: ignore[attr-defined]
    assert origin.seen[-1] == "/health"  # type: ignore[attr-defined]


def test_no_proxy_sends_remote_requests_direct(
    origin: ThreadingHTTPServer, proxy: ThreadingHTTPServer, clean_env: pytest.MonkeyPatch
) -> None:
    clean_env.setenv("HTTP_PROXY", _url(proxy))
    clean_env.setenv("NO_PROXY", "127.0.0.1")
    with http.client(purpose="remote") as remote:
        assert remote.get(f"{_url(origin)}/health").status_code == 200
    assert proxy.seen == []  # type: ignore[attr-defined]


def test_a_dead_proxy_is_a_clear_transient_error(
    origin: ThreadingHTTPServer, clean_env: pytest.MonkeyPatch, port: int
) -> None:
    clean_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")  # nothing listens there
    with http.client(purpose="remote") as remote, pytest.raises(TransientError) as info:
        http.send(remote, "GET", f"{_url(origin)}/health")
    assert "HTTPS_PROXY" in info.value.hint and info.value.status is None


# --- certificates -----------------------------------------------------------


@pytest.fixture
def tls_origin(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on 127.0.0.1 whose certificate only a private CA vouches for."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=inferfleet test CA"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    server, thread = _serve(_Origin)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    # A client that does not trust the certificate aborts the handshake: expected here.
    server.handle_error = lambda *_args: None  # type: ignore[method-assign]
    yield f"https://127.0.0.1:{server.server_address[1]}", cert
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"])
def test_a_private_ca_from_the_environment_is_trusted(
    tls_origin: tuple[str, Path], clean_env: pytest.MonkeyPatch, variable: str
) -> None:
    url, cert = tls_origin
    for purpose in ("remote", "fleet"):
        with http.client(purpose=purpose) as untrusting, pytest.raises(TransientError):
            http.send(untrusting, "GET", f"{url}/health")
    clean_env.setenv(variable, str(cert))
    for purpose in ("remote", "fleet"):
        with http.client(purpose=purpose) as trusting:
            assert http.send(trusting, "GET", f"{url}/health").status_code == 200


def test_ssl_cert_file_wins_over_requests_ca_bundle(
    tls_origin: tuple[str, Path], clean_env: pytest.MonkeyPatch
) -> None:
    url, cert = tls_origin
    clean_env.setenv("REQUESTS_CA_BUNDLE", str(cert))
    clean_env.setenv("SSL_CERT_FILE", certifi.where())  # public CAs only
    with http.client(purpose="remote") as client, pytest.raises(TransientError):
        http.send(client, "GET", f"{url}/health")
