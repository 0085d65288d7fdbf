"""The edge's single seams: status mapping, redirects hop by hop, retries, token scope.

Pure parts are tested with data; ``send`` and the body gist against a real
server on loopback.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from inferfleet.errors import (
    AuthError,
    FleetError,
    GatedError,
    HTTPError,
    RemoteNotFoundError,
    TransientError,
)
from inferfleet.io import http, http_errors, token_scope
from inferfleet.io.retry import Attempts, GaveUp, Retry, retrying

HUB = http_errors.Asked(
    subject="org/repo",
    url="https://hub.example/org/repo/resolve/main/m.gguf",
    repo="org/repo",
    path="m.gguf",
    endpoint="https://hub.example",
    token="HF_TOKEN",
)
PLAIN = http_errors.Asked(subject="the GGUF file", url="http://10.0.0.5/m.gguf", token=None)


def _error(status: int, headers: dict[str, str], asked: http_errors.Asked = HUB) -> HTTPError:
    return http_errors.status_error(status, httpx.Headers(headers), "gist", asked)


@pytest.mark.parametrize(
    ("status", "headers", "kind"),
    [
        (503, {}, TransientError),
        (429, {}, TransientError),
        (408, {}, TransientError),
        (403, {"X-Error-Code": "GatedRepo"}, GatedError),
        (401, {"X-Error-Code": "GatedRepo"}, GatedError),
        (401, {}, AuthError),
        (403, {}, AuthError),
        (404, {"X-Error-Code": "RevisionNotFound"}, RemoteNotFoundError),
        (404, {}, RemoteNotFoundError),
        (418, {}, HTTPError),
    ],
)
def test_one_mapper_decides_every_status(
    status: int, headers: dict[str, str], kind: type[HTTPError]
) -> None:
    error = _error(status, headers)
    assert type(error) is kind and isinstance(error, FleetError)
    assert error.status == status and error.where == HUB.url
    assert error.hint  # every error says how to fix it


def test_final_errors_are_never_transient_L07() -> None:
    for status, headers in ((403, {"X-Error-Code": "GatedRepo"}), (401, {}), (403, {}), (404, {})):
        error = _error(status, headers)
        assert not isinstance(error, TransientError)
    gated = _error(403, {"X-Error-Code": "GatedRepo", "X-Error-Message": "ask the owner"})
    assert "https://hub.example/org/repo" in gated.hint and "Not retried" in gated.hint
    assert "HF_TOKEN" in gated.message and "ask the owner" in gated.message


def test_retry_after_is_read_and_capped() -> None:
    burst, flood = _error(503, {"Retry-After": "7"}), _error(429, {"Retry-After": "3600"})
    assert isinstance(burst, TransientError) and burst.retry_after == 7.0
    assert isinstance(flood, TransientError) and flood.retry_after == 60.0
    dated = _error(503, {"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"})
    assert isinstance(dated, TransientError) and dated.retry_after == 60.0


def test_messages_outside_the_hub_point_at_the_url_and_the_token_options() -> None:
    gone = _error(404, {}, PLAIN)
    assert "HTTP 404" in gone.message and "file name in the URL" in gone.hint
    denied = _error(403, {}, PLAIN)
    assert "gated" in denied.hint and "its page on the Hub" not in denied.hint
    anonymous = _error(401, {}, PLAIN)
    assert "HTTP 401" in anonymous.message and "HF_TOKEN" in anonymous.hint


class _Server(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, dict[str, str], bytes]] = {}

    def log_message(self, *_args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("Authorization")))  # type: ignore[attr-defined]
        status, headers, body = self.server.routes.get(self.path, (404, {}, b""))  # type: ignore[attr-defined]
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value.replace("{port}", str(self.server.server_address[1])))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    srv.daemon_threads = True
    srv.seen = []  # type: ignore[attr-defined]
    srv.routes = {}  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def test_send_follows_hop_by_hop_with_each_hops_own_headers(server: ThreadingHTTPServer) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    server.routes.update(  # type: ignore[attr-defined]
        {
            "/a": (302, {"Location": "/b", "X-Linked-Size": "5"}, b""),
            "/b": (307, {"Location": "http://localhost:{port}/c"}, b"redirect page"),
            "/c": (200, {}, b"hello"),
            "/loop": (302, {"Location": "/loop"}, b""),
        }
    )
    seen_redirects: list[str] = []

    def look(answer: httpx.Response) -> bool:
        seen_redirects.append(answer.headers.get("x-linked-size", "-"))
        return False

    with http.client() as client:
        answer = http.send(
            client,
            "GET",
            f"{base}/a",
            headers_for=lambda url: token_scope.bearer(url, endpoint=base, token="t0k"),
            keep_redirect=look,
        )
        assert answer.status_code == 200 and answer.text == "hello"
        assert seen_redirects == ["5", "-"]
        # The token went to the endpoint's origin only, never to the redirect's other origin.
        assert server.seen == [("/a", "Bearer t0k"), ("/b", "Bearer t0k"), ("/c", None)]  # type: ignore[attr-defined]
        kept = http.send(client, "GET", f"{base}/a", keep_redirect=lambda a: True)
        assert kept.status_code == 302 and kept.headers["x-linked-size"] == "5"  # L-02
        with pytest.raises(HTTPError, match="more than 5 redirects"):
            http.send(client, "GET", f"{base}/loop")


def test_an_error_body_is_read_at_most_1_kib_L01(server: ThreadingHTTPServer) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    server.routes["/huge"] = (500, {}, b"x" * (8 << 20))  # type: ignore[attr-defined]
    with http.client() as client:
        answer = http.send(client, "GET", f"{base}/huge", stream=True)
        try:
            gist = http_errors.body_gist(answer)
            assert answer.num_bytes_downloaded < 256 << 10
        finally:
            answer.close()
    assert gist == "x" * 300


def test_fleet_raise_for_status_names_the_service_log(server: ThreadingHTTPServer) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    server.routes["/v1/models"] = (418, {}, b"teapot")  # type: ignore[attr-defined]
    with http.client(base_url=base) as client, pytest.raises(HTTPError) as info:
        http.raise_for_status(client.get("/v1/models"), what="GET /v1/models")
    assert "GET /v1/models: unexpected HTTP 418: teapot" in info.value.message
    assert "inferfleet logs" in info.value.hint


def test_one_retry_policy_counts_failures_in_a_row() -> None:
    policy = Retry(attempts=3, base=0.5, cap=1.5)
    assert [policy.delay(n, None) for n in (1, 2, 3, 4)] == [0.5, 1.0, 1.5, 1.5]
    assert policy.delay(1, 9.0) == 1.5  # Retry-After, capped
    attempts = Attempts(policy)
    attempts.failed(TransientError("one"))
    attempts.failed(TransientError("two"))
    attempts.progressed()  # new bytes came: a new count
    attempts.failed(TransientError("three"))
    attempts.failed(TransientError("four"))
    with pytest.raises(GaveUp) as spent:
        attempts.failed(TransientError("five"))
    assert spent.value.failures == 3 and spent.value.last.message == "five"


def test_retrying_retries_transient_only_and_waits_as_told() -> None:
    waits: list[float] = []
    answers = iter([TransientError("busy", retry_after=0.2), TransientError("busy"), "done"])

    def call() -> str:
        item = next(answers)
        if isinstance(item, Exception):
            raise item
        return item

    got = retrying(call, policy=Retry(attempts=5, base=0.1), wait=lambda s: bool(waits.append(s)))
    assert got == "done" and waits == [0.2, 0.2]
    calls = [0]

    def refused() -> str:
        calls[0] += 1
        raise AuthError("refused", hint="new token")

    with pytest.raises(AuthError):
        retrying(refused, policy=Retry(attempts=5), wait=lambda s: False)
    assert calls == [1]  # L-07: a final answer is one request


def test_token_scope_is_by_origin() -> None:
    mirror = "http://127.0.0.1:8000"
    assert token_scope.may_send_token(f"{mirror}/o/r/resolve/main/f", endpoint=mirror)
    assert token_scope.may_send_token("https://huggingface.co/o/r", endpoint=mirror)  # as `hf`
    assert token_scope.may_send_token("https://hf.co/o/r", endpoint=mirror)
    for other in (
        "http://127.0.0.1:8001/x",
        "https://127.0.0.1:8000/x",
        "http://localhost:8000/x",
        "https://cdn-lfs.hf.co/x",
        "https://huggingface.co.example/x",
    ):
        assert not token_scope.may_send_token(other, endpoint=mirror), other
    assert token_scope.bearer(f"{mirror}/x", endpoint=mirror, token=None) == {}
    assert token_scope.hub_endpoint(None, {"HF_ENDPOINT": "http://m:1/"}) == "http://m:1"
    assert token_scope.hub_endpoint("https://x", {"HF_ENDPOINT": "http://m"}) == "https://x"
    assert token_scope.hub_endpoint(None, {}) == "https://huggingface.co"
