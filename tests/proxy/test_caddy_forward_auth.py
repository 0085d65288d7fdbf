"""forward_auth: a real Caddy asks an outpost about every request and copies its identity headers.

Authentik and Authelia cannot run here (no images, no network): a small
loopback stand-in speaks their side of Caddy's forward-auth exchange (GET
with X-Forwarded-Method/-Uri; 2xx allows and carries identity headers,
anything else is sent back to the client). It allows a request that carries
``X-Test-Allow: yes`` and denies the rest. Behind Caddy, a loopback upstream
(declared as the gateway) answers with the headers it received.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import free_port
from helpers.asgi_server import serving
from proxy_helpers import proxy_fleet, running_caddy
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from inferfleet.render.caddy import GATEWAY_HEALTH_PATH, caddyfile

pytestmark = pytest.mark.slow


def outpost(asked: list[dict[str, str]]) -> Starlette:
    async def verify(request: Request) -> PlainTextResponse:
        asked.append(
            {k.lower(): v for k, v in request.headers.items()} | {"_path": request.url.path}
        )
        if request.headers.get("x-test-allow") != "yes":
            return PlainTextResponse("denied by the outpost", status_code=401)
        return PlainTextResponse(
            "ok", headers={"Remote-User": "alice", "Remote-Email": "alice@example.org"}
        )

    return Starlette(routes=[Route("/api/authz/forward-auth", verify)])


def echo_upstream() -> Starlette:
    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"path": request.url.path, "headers": dict(request.headers)})

    async def alive(_request: Request) -> PlainTextResponse:
        return PlainTextResponse("I'm alive!")

    return Starlette(
        routes=[
            Route(GATEWAY_HEALTH_PATH, alive),
            Route("/{rest:path}", echo, methods=["GET", "POST"]),
        ]
    )


def test_caddy_consults_the_outpost_and_copies_its_headers(
    tmp_path: Path, caddy_binary: Path
) -> None:
    asked: list[dict[str, Any]] = []
    with serving(outpost(asked)) as outpost_url, serving(echo_upstream()) as upstream_url:
        fleet = proxy_fleet(
            tmp_path,
            free_port(),
            {"auth": "forward_auth", "forward_auth": f"{outpost_url}/api/authz/forward-auth"},
            gateway={"port": int(upstream_url.rsplit(":", 1)[1]), "keys_env": "gateway.env"},
        )
        assert fleet.proxy is not None
        text = caddyfile(fleet, fleet.proxy.host)
        with (
            running_caddy(caddy_binary, text, tmp_path / "caddy", fleet.proxy.port) as caddy,
            httpx.Client(base_url=caddy.url, verify=caddy.tls, timeout=30) as client,
        ):
            denied = client.post("/v1/chat/completions", json={"model": "x"})
            forged = {"X-Test-Allow": "yes", "Remote-Groups": "admins", "Remote-User": "root"}
            allowed = client.post("/v1/chat/completions", json={"model": "x"}, headers=forged)
    assert denied.status_code == 401
    assert denied.text == "denied by the outpost"  # the outpost's answer goes back as is
    assert allowed.status_code == 200, allowed.text
    seen = allowed.json()
    assert seen["path"] == "/v1/chat/completions"  # the gateway's paths pass unchanged
    assert seen["headers"]["remote-user"] == "alice"  # the outpost's identity, not the client's
    assert seen["headers"]["remote-email"] == "alice@example.org"
    assert "remote-groups" not in seen["headers"]  # a client's own identity header is dropped
    # The outpost was asked about both requests, at its verify path, with what they were for.
    verifies = [a for a in asked if a["_path"] == "/api/authz/forward-auth"]
    assert len(verifies) == 2
    assert verifies[0]["x-forwarded-method"] == "POST"
    assert verifies[0]["x-forwarded-uri"] == "/v1/chat/completions"
    assert verifies[1]["x-test-allow"] == "yes"
