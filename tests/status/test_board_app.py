"""The board's ASGI app without a browser: headers, the status document, assets, caching."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import free_port
from helpers.real_server import fleet_data, write_fleet
from starlette.testclient import TestClient

from inferfleet.errors import UsageError
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.status import Collector, Options
from inferfleet.status.web import (
    CSP,
    create_app,
)

LOCAL = "http://localhost"  # the board answers only names of this machine (HostCheck)


@pytest.fixture
def collector(tmp_path: Path) -> Collector:
    loaded = load_fleet(write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port())))
    return Collector(loaded, Options(results_dir=tmp_path / "bench"))


def test_the_page_is_self_contained_and_locked_to_its_own_origin(collector: Collector) -> None:
    with TestClient(
        create_app(collector, interval=3, title="<b>lab</b>"), base_url=LOCAL
    ) as client:
        page = client.get("/")
        assert page.status_code == 200
        assert page.headers["content-security-policy"] == CSP
        assert "default-src 'none'" in CSP and "connect-src 'self'" in CSP
        assert page.headers["x-content-type-options"] == "nosniff"
        html = page.text
        assert 'data-interval="3"' in html
        assert "&lt;b&gt;lab&lt;/b&gt;" in html and "<b>lab</b>" not in html
        # Nothing from another origin: every script, style and link is a path on this board
        # (the SVG namespace is a name, never fetched).
        assert "http://" not in html and "https://" not in html
        for asset, kind in (("board.js", "javascript"), ("board.css", "css")):
            answer = client.get(f"/static/{asset}")
            assert answer.status_code == 200 and kind in answer.headers["content-type"]
            text = answer.text.replace('"http://www.w3.org/2000/svg"', "")
            assert "http://" not in text and "https://" not in text and "url(" not in text


def test_only_the_boards_own_assets_are_served(collector: Collector) -> None:
    with TestClient(create_app(collector), base_url=LOCAL) as client:
        assert client.get("/static/index.html").status_code == 404
        assert client.get("/static/..%2f..%2fapp.py").status_code == 404
        assert client.get("/static/board.js.map").status_code == 404


def test_the_status_document(collector: Collector) -> None:
    with TestClient(create_app(collector), base_url=LOCAL) as client:
        answer = client.get("/api/status")
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
    doc = answer.json()
    assert doc["schema"] == "inferfleet.status/v2"
    [service] = doc["services"]
    assert (service["service"], service["state"], service["kind"]) == ("gemma", "stopped", "llm")
    assert doc["hosts"][0]["reach"] == "local"


def test_an_unknown_host_fails_before_anything_is_served(collector: Collector) -> None:
    with pytest.raises(UsageError, match="no host named 'atlas'"):
        create_app(collector, hosts=["atlas"])
