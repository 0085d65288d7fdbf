"""One token policy: a credential goes over https, or plain http to loopback only (L-06).

A LAN address made by the test (the lab's bridge in the root namespace,
``10.250.N.1``) stands for a mirror or gateway on the LAN: real TCP, plain
http, beyond loopback. The Hub listing calls (huggingface_hub's HfApi) send
the Hub token there no more than the downloads do; ``status`` (and the
board, which reads the same row every 2 s) never sends the gateway's master
key there. A loopback control shows each test can see a token go out.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import deploy_fixtures, free_port
from helpers.asgi_server import serving
from helpers.cli import CliResult
from helpers.real_server import fleet_data, write_fleet
from hub_repos import whole_repo
from hub_tokens import GOOD_TOKEN
from hubserver import HubServer, _HubHandler
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.status.frontdoor import read_gateway

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]  # creates a bridge

Cli = Callable[..., CliResult]

if str(deploy_fixtures.DEPLOY) not in sys.path:
    sys.path.insert(0, str(deploy_fixtures.DEPLOY))
from deploy_hosts import Lab, claim_tag  # noqa: E402


@pytest.fixture(scope="module")
def lan_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An address of this machine on a bridge the test made: plain http to it leaves
    loopback, as it would to a mirror on the LAN."""
    lab = Lab(tmp_path_factory.mktemp("lan"), claim_tag())
    try:
        lab.start([])
        yield f"{lab.subnet}.1"
    finally:
        lab.close()


class LanHub(HubServer):
    """The test Hub listening on ``address`` (its CDN is not used by listing calls)."""

    def __init__(self, address: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.address = address

    def start(self) -> None:
        hub = self._listen(self.address, _HubHandler)
        self.endpoint = f"http://{self.address}:{hub.server_address[1]}"


@pytest.mark.parametrize("where", ["lan", "loopback"])
def test_the_hub_listing_sends_no_token_over_plain_http_to_the_lan(
    lan_address: str, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)
    hub: HubServer = LanHub(lan_address, tokens={GOOD_TOKEN: None})
    if where == "loopback":
        hub = HubServer(tokens={GOOD_TOKEN: None})
    with hub:
        repo = hub.add(whole_repo())  # public: anonymous listing works
        out = tmp_path / "m.manifest"
        result = cli(
            "models", "manifest", repo.repo_id, "--endpoint", hub.endpoint, "--out", str(out)
        )
        assert result.code == 0, result.stderr
        listing = [r for r in hub.requests() if "/api/" in r.path]
    assert listing, "the listing calls never reached the test Hub"
    sent = {r.auth for r in listing}
    if where == "lan":
        assert sent == {None}, "the Hub token went over plain http to a LAN address"
    else:
        assert sent == {f"Bearer {GOOD_TOKEN}"}  # the control: the same calls on loopback


def _gateway(seen: list[str | None]) -> Starlette:
    async def ready(request: Request) -> JSONResponse:
        seen.append(request.headers.get("authorization"))
        return JSONResponse({"status": "healthy"})

    async def health(request: Request) -> JSONResponse:
        seen.append(request.headers.get("authorization"))
        return JSONResponse({"healthy_endpoints": [], "unhealthy_endpoints": []})

    return Starlette(
        routes=[Route("/health/readiness", ready), Route("/health", health)],
    )


@pytest.mark.parametrize("where", ["lan", "loopback"])
def test_status_never_sends_the_master_key_over_plain_http_to_the_lan(
    lan_address: str, tmp_path: Path, where: str
) -> None:
    key = "sk-" + "k" * 40
    seen: list[str | None] = []
    address = lan_address if where == "lan" else "127.0.0.1"
    with serving(_gateway(seen), address) as url:
        data = fleet_data(free_port())
        data["gateway"] = {
            "host": "local",
            "bind": address,
            "port": int(url.rsplit(":", 1)[1]),
            "keys_env": str(tmp_path / "gateway.env"),
            "exposure": {"level": "lan", "reason": "the team's clients"}
            if where == "lan"
            else "loopback",
        }
        loaded = load_fleet(write_fleet(tmp_path / "fleet.yaml", data))
        with httpx.Client(timeout=5) as client:
            row = read_gateway(loaded, client, key)
    assert row is not None and seen, "the gateway was never asked"
    if where == "lan":
        assert f"Bearer {key}" not in seen and set(seen) == {None}
        assert "never sent" in row.detail and address in row.detail
    else:
        assert f"Bearer {key}" in seen  # the control: on loopback it is sent
