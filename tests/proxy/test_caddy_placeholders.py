"""No fleet value reaches the proxy's Caddyfile as a placeholder (L-55).

Caddy expands ``{$VAR}`` while it reads a Caddyfile (quoted or not) and
``{env.VAR}``, ``{http.*}`` where a directive runs: ``acme_email:
"{$INFERFLEET_PROXY_KEY}@x.org"`` would send the proxy's key to the ACME CA
the fleet names, ``health.path: "/h{env.INFERFLEET_PROXY_KEY}"`` would put it
in every health URL. The schema refuses braces in those fields (file:line),
the renderer refuses them in any token (a Fleet built in code), and a real
Caddy shows that what the schema lets through (a percent-encoded brace) stays
literal: the upstream never sees the key.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import free_port
from helpers.asgi_server import serving
from helpers.cli import CliResult
from helpers.real_server import fleet_data, write_fleet
from proxy_helpers import REASON, proxy_fleet, running_caddy
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from inferfleet.errors import UsageError
from inferfleet.render.caddy import caddyfile, key_names

Cli = Callable[..., CliResult]
HOSTILE = ["{$INFERFLEET_PROXY_KEY}", "{env.INFERFLEET_PROXY_KEY}", "{http.request.header.x}"]


def _proxy(tmp_path: Path, **fields: Any) -> dict[str, Any]:
    return {
        "host": "local",
        "bind": "127.0.0.1",
        "port": free_port(),
        "exposure": {"level": "lan", "reason": REASON},
        "auth": "bearer",
        "keys_env": str(tmp_path / "proxy.env"),
        "services": ["gemma"],
        **fields,
    }


@pytest.mark.parametrize("placeholder", HOSTILE)
@pytest.mark.parametrize("where", ["acme_email", "health.path"])
def test_the_schema_refuses_a_placeholder_with_its_place(
    tmp_path: Path, cli: Cli, placeholder: str, where: str
) -> None:
    data = fleet_data(free_port())
    if where == "acme_email":
        data["proxy"] = _proxy(
            tmp_path, tls="acme", names=["ai.example.org"], acme_email=f"{placeholder}@x.org"
        )
    else:
        data["proxy"] = _proxy(tmp_path)
        data["services"]["gemma"]["health"]["path"] = f"/h{placeholder}"
    fleet_file = write_fleet(tmp_path / "fleet" / "fleet.yaml", data)
    out = tmp_path / "out"
    result = cli("render", "-f", str(fleet_file), "--out", str(out), "--no-check")
    assert result.code == 2, result.stdout + result.stderr
    assert "fleet.yaml:" in result.stderr and where.split(".")[-1] in result.stderr
    assert "placeholder" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()  # nothing rendered


@pytest.mark.parametrize("placeholder", HOSTILE)
def test_the_renderer_refuses_a_placeholder_the_schema_never_saw(
    tmp_path: Path, placeholder: str
) -> None:
    fleet = proxy_fleet(tmp_path, free_port(), _proxy(tmp_path))
    gemma = fleet.services["gemma"]
    health = gemma.health.model_copy(update={"path": f"/h{placeholder}"})
    services = {"gemma": gemma.model_copy(update={"health": health})}
    built = fleet.model_copy(update={"services": services})  # no validation: a Fleet in code
    assert built.proxy is not None
    with pytest.raises(UsageError, match="placeholder") as caught:
        caddyfile(built, built.proxy.host)
    assert "INFERFLEET_PROXY_KEY}" in str(caught.value) or "http.request" in str(caught.value)


def _recorder(seen: list[str]) -> Starlette:
    async def anything(request: Request) -> PlainTextResponse:
        seen.append(request.url.path + "?" + request.url.query + " " + str(request.headers))
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/{rest:path}", anything, methods=["GET", "POST"])])


@pytest.mark.slow
@pytest.mark.e2e
def test_a_real_caddy_keeps_a_percent_encoded_brace_literal(
    tmp_path: Path, caddy_binary: Path
) -> None:
    key = secrets.token_urlsafe(32)
    keys_file = tmp_path / "proxy.env"
    keys_file.write_text(f"INFERFLEET_PROXY_KEY={key}\n")
    seen: list[str] = []
    # What the schema lets through: no brace, only its percent-encoding and a '$'.
    health = "/h%7B$INFERFLEET_PROXY_KEY%7D%7Benv.INFERFLEET_PROXY_KEY%7D"
    with serving(_recorder(seen)) as upstream:
        port = int(upstream.rsplit(":", 1)[1])
        data = fleet_data(port)
        data["services"]["gemma"]["health"]["path"] = health
        data["proxy"] = _proxy(tmp_path, tls="internal")
        fleet_file = write_fleet(tmp_path / "fleet.yaml", data)
        from inferfleet.fleetfile.loader import load_fleet

        fleet = load_fleet(fleet_file).fleet
        assert fleet.proxy is not None
        text = caddyfile(fleet, fleet.proxy.host)
        assert key not in text
        with running_caddy(
            caddy_binary,
            text,
            tmp_path / "caddy",
            fleet.proxy.port,
            list(key_names(fleet)),
            keys_file.read_text(),
        ) as caddy:
            deadline = time.monotonic() + 20
            while not seen and time.monotonic() < deadline:
                time.sleep(0.1)  # Caddy's first active health check
            with httpx.Client(base_url=caddy.url, verify=caddy.tls, timeout=30) as client:
                answer = client.get("/gemma/v1/models", headers={"Authorization": f"Bearer {key}"})
        assert answer.status_code == 200, answer.text
    assert seen, "the upstream was never asked"
    health_checks = [s for s in seen if s.startswith("/h")]
    assert health_checks, seen
    for request in health_checks:
        assert key not in request  # neither in its path nor in a header Caddy added
    # The client's own request carries its key in its header only (Caddy passes it on).
    [proxied] = [s for s in seen if s.startswith("/v1/models")]
    assert key not in proxied.split(" ", 1)[0]
    assert any("{$INFERFLEET_PROXY_KEY}" in s or "%7B$INFERFLEET" in s for s in health_checks)
