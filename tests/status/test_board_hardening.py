"""The board against DNS rebinding and against reading the fleet on every poll.

The board is served by uvicorn on a loopback port (``helpers.asgi_server``)
for a fleet whose one service is a real HTTP server on this machine that
counts the health checks it answers: each collection of the fleet reads that
health path a fixed number of times (measured once per test by collecting
directly), so the count tells how many collections the board made.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from helpers.asgi_server import serving
from helpers.real_server import SERVICE, fleet_data, write_fleet

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.status import Collector, Options
from inferfleet.status.web import Snapshots, create_app


@dataclass
class CountingService:
    """A service endpoint on loopback that counts GETs of one path."""

    path: str
    port: int = 0
    hits: int = 0
    per_collection: int = 0  # health checks in one collection of the fleet
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def service() -> Iterator[CountingService]:
    counted = CountingService(path="/health")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            if self.path == counted.path:
                with counted.lock:
                    counted.hits += 1
            body = b'{"status": "ok"}' if self.path == counted.path else b"{}"
            self.send_response(200 if self.path == counted.path else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    counted.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield counted
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def collector(tmp_path: Path, service: CountingService) -> Collector:
    loaded = load_fleet(write_fleet(tmp_path / "fleet.yaml", fleet_data(service.port)))
    assert loaded.fleet.services[SERVICE].health.path == service.path
    made = Collector(loaded, Options(ssh=False, results_dir=tmp_path / "bench"))
    made.collect()
    service.per_collection, service.hits = service.hits, 0
    assert service.per_collection >= 1
    return made


def test_many_rapid_polls_from_many_pages_cause_one_collection(
    collector: Collector, service: CountingService
) -> None:
    app = create_app(collector, interval=60)
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        time.sleep(0.5)
        assert service.hits == 0  # nobody is looking yet: the fleet is not read

        def poll(_: int) -> int:
            answer = client.get("/api/status")
            assert answer.json()["services"][0]["service"] == SERVICE
            return answer.status_code

        with ThreadPoolExecutor(max_workers=8) as pool:
            codes = list(pool.map(poll, range(40)))
        assert codes == [200] * 40
    assert app.state.snapshots.collections == 1
    assert service.hits == service.per_collection


def test_collection_follows_the_interval_while_watched_and_stops_when_nobody_looks(
    collector: Collector, service: CountingService
) -> None:
    snapshots = Snapshots(collector, None, every=0.2, idle=0.6)
    try:
        started = time.monotonic()
        while time.monotonic() - started < 1.2:
            doc, error = snapshots.document()
            assert doc is not None and error == ""
            time.sleep(0.05)  # 20 polls a second, five collections a second at most
        watched = snapshots.collections
        assert 2 <= watched <= 1.2 / 0.2 + 2  # at most one per `every`, not one per poll
        time.sleep(1.5)  # past `idle`: the board stops reading the fleet
        paused = snapshots.collections
        assert paused <= watched + 4
        time.sleep(1.0)
        assert snapshots.collections == paused
        assert service.hits == paused * service.per_collection
        # The next poll after the pause waits for a fresh snapshot, not the stale one.
        before = time.time()
        doc, _error = snapshots.document()
        assert doc is not None and doc["collected_at"] >= before - 0.01
        assert snapshots.collections == paused + 1
    finally:
        snapshots.close()


EVIL = {"Host": "evil.example"}


def test_a_request_naming_another_host_gets_421_and_no_fleet_data(
    collector: Collector, service: CountingService
) -> None:
    with serving(create_app(collector, interval=60)) as url, httpx.Client(base_url=url) as client:
        for path in ("/", "/api/status", "/static/board.js", "/healthz"):
            answer = client.get(path, headers=EVIL)
            assert answer.status_code == 421, path
            assert SERVICE not in answer.text and str(collector.loaded.path) not in answer.text
            assert "--allow-host" in answer.text
        assert service.hits == 0  # a refused request does not even start a collection
        for host in (f"127.0.0.1:{url.rsplit(':', 1)[1]}", "localhost", "[::1]:1"):
            assert client.get("/api/status", headers={"Host": host}).status_code == 200
        # A Host header that is missing or empty names nothing: refused as well.
        assert client.get("/healthz", headers={"Host": ""}).status_code == 421


def test_names_given_with_allow_host_are_served(collector: Collector) -> None:
    app = create_app(collector, interval=60, allow_hosts=["board.lan"])
    with serving(app) as url, httpx.Client(base_url=url) as client:
        assert client.get("/", headers={"Host": "board.lan:8765"}).status_code == 200
        assert client.get("/", headers={"Host": "Board.LAN."}).status_code == 200
        assert client.get("/", headers={"Host": "board.lan.evil.example"}).status_code == 421
        assert client.get("/", headers=EVIL).status_code == 421
