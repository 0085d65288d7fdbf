"""Every llama-server inferfleet starts is closed to other origins (L-58).

llama-server's default answers any ``Origin`` with that origin and
credentials allowed, so a web page in a browser that reaches the port
(loopback included: the browser runs on the same machine) could drive it.
The rendered argv says ``--cors-origins none --no-cors-credentials``: no page's
origin, so a browser refuses to send a cross-origin request or read an answer.
"""

from __future__ import annotations

import httpx
import pytest
from helpers.real_server import Running

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.parametrize("origin", ["https://evil.example", "http://localhost:3000", "null"])
def test_a_cross_origin_preflight_and_read_fail(server: Running, origin: str) -> None:
    preflight = httpx.options(
        f"{server.url}/v1/chat/completions",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization",
        },
        timeout=10,
    )
    assert preflight.headers.get("access-control-allow-origin") not in {origin, "*"}
    assert preflight.headers.get("access-control-allow-credentials") != "true"
    read = httpx.get(f"{server.url}/v1/models", headers={"Origin": origin}, timeout=10)
    assert read.status_code == 200  # a client that is no browser still reads it
    assert read.headers.get("access-control-allow-origin") not in {origin, "*"}
