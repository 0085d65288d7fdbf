"""The board in a real browser (Debian's chromium, driven by Playwright) with the real server.

The llama-server is started by ``inferfleet up`` (process backend) and the
board by its CLI, both on free loopback ports. The page must show the server
healthy, then turn it to a problem state once the server is stopped, and
never load anything from outside the board. Screenshots of both states are
saved in the test's tmp dir; with ``INFERFLEET_BOARD_SCREENSHOT=PATH`` the
healthy one is also written there (that is how docs/board.png is made).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import free_port
from helpers.bench_summaries import summary, write
from helpers.board import board, chromium
from helpers.real_server import SERVICE, Served, fleet_data, served, write_fleet

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def board_fleet(port: int) -> dict[str, Any]:
    """The real service on this machine, plus a remote host whose one service is unknown."""
    data = fleet_data(port)
    data["hosts"]["atlas"] = {"address": "atlas.example"}
    data["services"]["grafana"] = {
        "host": "atlas",
        "kind": "container",
        "image": "docker.io/grafana/grafana@sha256:" + "0" * 64,
        "port": free_port(),  # loopback on atlas: only atlas could tell
        "health": {"path": "/api/health"},
    }
    return data


@pytest.fixture
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def gemma(tmp_path: Path) -> Iterator[Served]:
    fleet = write_fleet(tmp_path / "fleet.yaml", board_fleet(free_port()))
    with served(fleet, tmp_path / "state") as running:
        yield running


def card(service: str) -> str:
    return f'[data-service="{service}"]'


def test_the_board_shows_the_real_server_healthy_then_down_when_it_stops(
    gemma: Served, browser: Any, tmp_path: Path
) -> None:
    results = tmp_path / "state" / "bench"
    write(results, "run-1", summary("2026-11-30T12:00:00Z", url=gemma.url, service=SERVICE))
    with board(gemma.loaded.path, results, tmp_path / "board.log") as url:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(url)

        healthy = f'{card(SERVICE)} .badge.state[data-state="healthy"]'
        page.wait_for_selector(healthy, timeout=60_000)
        sections = page.locator("main h2").all_inner_texts()
        assert [s.lower() for s in sections[:3]] == ["llm endpoints", "other services", "hosts"]
        text = page.locator(card(SERVICE)).inner_text()
        assert "gemma3-270m" in text and "4096 per slot \u00d7 2" in text
        assert str(gemma.pid) in text
        slots = page.locator(f"{card(SERVICE)} .slots")
        assert slots.get_attribute("data-total") == "2"
        assert slots.get_attribute("data-busy") == "0"
        assert page.locator(f"{card(SERVICE)} .slot").count() == 2
        links = page.locator(f"{card(SERVICE)} .links a")
        hrefs = {links.nth(i).inner_text(): links.nth(i).get_attribute("href") for i in
                 range(links.count())}  # fmt: skip
        assert hrefs["health"] == f"{gemma.url}/health"
        assert hrefs["api"] == f"{gemma.url}/v1"
        # The last bench: one bar per level for per-stream and aggregate (L-53).
        bars = page.locator(f"{card(SERVICE)} .chart svg rect")
        assert bars.count() == 4
        assert bars.first.get_attribute("data-value") == "38.5"
        assert "38.5 tok/s per stream" in text
        # The remote host's loopback service is judged on its host, which is not asked
        # (the fleet is not in a git repository): unknown, and so is the host.
        other = page.locator(f"#other-cards {card('grafana')} .badge.state")
        assert other.get_attribute("data-state") == "unknown"
        host = page.locator('#host-cards [data-host="atlas"] .badge')
        assert host.get_attribute("data-state") == "unknown"
        assert page.locator('#host-cards [data-host="local"] .badge').inner_text() == "local"

        shot = tmp_path / "board-healthy.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        copy_to = os.environ.get("INFERFLEET_BOARD_SCREENSHOT")
        if copy_to:
            shutil.copyfile(shot, copy_to)

        gemma.kill()  # stopped by pid, as a crash would: its record stays behind
        # While it shuts down it reads unhealthy (the port is closed, the pid still
        # there); once the pid is gone its record is stale: a crash, not a stop.
        stale = f'{card(SERVICE)} .badge.state[data-state="stale"]'
        page.wait_for_selector(stale, timeout=60_000)
        assert "bad" in (page.locator(card(SERVICE)).get_attribute("class") or "")
        # "is gone", or "now belongs to" its zombie while this test (its parent) has not reaped it.
        assert f"recorded pid {gemma.pid} " in page.locator(card(SERVICE)).inner_text()
        page.screenshot(path=str(tmp_path / "board-stopped.png"), full_page=True)
        assert (tmp_path / "board-stopped.png").stat().st_size > 10_000

    outside = [u for u in requested if not u.startswith(url + "/")]
    assert outside == [], f"the page loaded something from outside the board: {outside}"


def test_the_page_says_so_when_the_board_itself_goes_away(browser: Any, tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port()))
    page = browser.new_page()
    with board(fleet, tmp_path / "bench", tmp_path / "board.log") as url:
        page.goto(url)
        page.wait_for_selector(f'{card(SERVICE)} .badge.state[data-state="stopped"]')
    page.wait_for_selector("#banner:not([hidden])", timeout=30_000)
    assert "cannot read the status" in page.locator("#banner").inner_text()
    assert page.locator("#updated").get_attribute("data-state") == "stale"


def test_board_cli_errors(
    cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port()))
    # Positionals name services on every verb; hosts are named with --host.
    result = cli("board", "nowhere", "--file", str(fleet), "--port", "0")
    assert result.code == 2 and "no service named 'nowhere'" in result.stderr
    assert "services: gemma" in result.stderr and "--host" in result.stderr
    result = cli("board", "--host", "nowhere", "--file", str(fleet), "--port", "0")
    assert result.code == 2 and "no host named 'nowhere'" in result.stderr
    assert "hosts: local" in result.stderr

    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = cli("board", "--file", str(fleet), "--port", str(port))
    assert result.code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "--port (0 picks a free one)" in result.stderr
