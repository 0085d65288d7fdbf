"""A real Caddy, serving the Caddyfile rendered from the fleet, in front of the real llama-server.

TLS is ``tls internal``: Caddy's own local CA, whose root the client trusts
from Caddy's data dir (and nothing else). Keys come from the keys env file
into Caddy's environment; the Caddyfile names them only. Loopback only.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import httpx
import pytest
from helpers.real_server import Running
from proxy_helpers import proxy_fleet, running_caddy

from inferfleet.render.caddy import caddyfile, key_names

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

KEYS_ENV = "proxy.env"


def _setup(tmp_path: Path, server: Running) -> tuple[str, list[str], str, str, int]:
    """(Caddyfile text, key names, keys file text, the accepted key, proxy port)."""
    keys_file = tmp_path / KEYS_ENV
    key = secrets.token_urlsafe(32)
    old = secrets.token_urlsafe(32)
    keys_file.write_text(f"CLIENT_KEY={key}\nOLD_KEY='{old}'\n")
    fleet = proxy_fleet(
        tmp_path,
        server.port,
        {
            "auth": "bearer",
            "keys_env": str(keys_file),
            "key_names": ["CLIENT_KEY", "OLD_KEY"],
            "tls": "internal",
            "services": ["gemma"],
        },
    )
    assert fleet.proxy is not None
    text = caddyfile(fleet, fleet.proxy.host)
    assert key not in text and old not in text  # L-55: names only, never values
    return text, list(key_names(fleet)), keys_file.read_text(), key, fleet.proxy.port


def test_keys_decide_and_the_completion_comes_back_over_tls(
    tmp_path: Path, server: Running, caddy_binary: Path
) -> None:
    text, names, keys_text, key, port = _setup(tmp_path, server)
    with (
        running_caddy(caddy_binary, text, tmp_path / "caddy", port, names, keys_text) as caddy,
        httpx.Client(base_url=caddy.url, verify=caddy.tls, timeout=120) as client,
    ):
        body = {"prompt": "The capital of France is", "n_predict": 8}
        none = client.post("/gemma/completion", json=body)
        wrong = client.post(
            "/gemma/completion", json=body, headers={"Authorization": "Bearer nope-" + key}
        )
        empty = client.post("/gemma/completion", json=body, headers={"Authorization": "Bearer"})
        right = client.post(
            "/gemma/completion", json=body, headers={"Authorization": f"Bearer {key}"}
        )
        unrouted = client.get("/elsewhere/health", headers={"Authorization": f"Bearer {key}"})
    for refused in (none, wrong, empty):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["error"]["code"] == "invalid_api_key"
    assert right.status_code == 200, right.text
    answer = right.json()
    assert answer["content"] and answer["tokens_predicted"] == 8
    assert unrouted.status_code == 404
    assert right.http_version in {"HTTP/1.1", "HTTP/2"}


def test_the_second_key_is_accepted_too_and_a_missing_variable_matches_nothing(
    tmp_path: Path, server: Running, caddy_binary: Path
) -> None:
    text, names, keys_text, key, port = _setup(tmp_path, server)
    old = keys_text.split("OLD_KEY=")[1].strip().strip("'")
    # Caddy started with only CLIENT_KEY in its environment: OLD_KEY is unset (empty).
    only_first = f"CLIENT_KEY={key}\n"
    with (
        running_caddy(
            caddy_binary, text, tmp_path / "caddy", port, ["CLIENT_KEY"], only_first
        ) as caddy,
        httpx.Client(base_url=caddy.url, verify=caddy.tls, timeout=60) as client,
    ):
        with_old = client.get("/gemma/health", headers={"Authorization": f"Bearer {old}"})
        blank = client.get("/gemma/health", headers={"Authorization": "Bearer"})
        with_new = client.get("/gemma/health", headers={"Authorization": f"Bearer {key}"})
    assert with_old.status_code == 401
    assert blank.status_code == 401
    assert with_new.status_code == 200
    with (
        running_caddy(caddy_binary, text, tmp_path / "caddy2", port, names, keys_text) as caddy,
        httpx.Client(base_url=caddy.url, verify=caddy.tls, timeout=60) as client,
    ):
        assert (
            client.get("/gemma/health", headers={"Authorization": f"Bearer {old}"}).status_code
            == 200
        )


def test_a_stream_is_flushed_event_by_event_not_buffered(
    tmp_path: Path, server: Running, caddy_binary: Path
) -> None:
    text, names, keys_text, key, port = _setup(tmp_path, server)
    body = {"prompt": "Once upon a time", "n_predict": 96, "ignore_eos": True, "stream": True}
    arrivals: list[tuple[float, dict[str, object]]] = []
    with (
        running_caddy(caddy_binary, text, tmp_path / "caddy", port, names, keys_text) as caddy,
        httpx.Client(base_url=caddy.url, verify=caddy.tls, timeout=300) as client,
    ):
        headers = {"Authorization": f"Bearer {key}"}
        with client.stream("POST", "/gemma/completion", json=body, headers=headers) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    arrivals.append((time.monotonic(), json.loads(line[6:])))
    assert len(arrivals) >= 96
    first_at, first = arrivals[0]
    last_at, last = arrivals[-1]
    assert first["stop"] is False and last["stop"] is True
    # Buffered, every event would arrive together at the end. Flushed, the first one
    # arrives while the generation still runs: most of the stream's span lies after it.
    span = last_at - first_at
    distinct = {round(at, 3) for at, _ in arrivals}
    assert len(distinct) > len(arrivals) // 2, "events arrived in bursts, not one by one"
    middle_at = arrivals[len(arrivals) // 2][0]
    assert first_at < middle_at < last_at
    assert middle_at - first_at > 0.25 * span
