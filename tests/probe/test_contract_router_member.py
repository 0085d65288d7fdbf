"""The contract gate never passes a router member whose window it could not read (L-25).

A loopback stand-in of llama-server's router (the real one is exercised in
tests/groups/test_groups_router_real.py): it lists the member with the router's n_ctx 0,
answers the completion, and answers the member's /props?model= as given. Without the
explicit failing check (probe/minimal.py, "did not report its window") the first case
passes silently: that is the mutation it kills.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.asgi_server import serving
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from inferfleet.probe import minimal

ALIAS = "gemma-big"


def router_app(member_props: tuple[int, dict[str, Any]], busy: int = 0) -> Starlette:
    """``busy``: how many times the router's own /props answers 503 first (a loaded host)."""
    own_asked = [0]

    async def props(request: Request) -> JSONResponse:
        if "model" in request.query_params:
            status, body = member_props
            return JSONResponse(body, status_code=status)
        own_asked[0] += 1
        if own_asked[0] <= busy:
            return JSONResponse({"error": "busy"}, status_code=503)
        return JSONResponse({"role": "router", "default_generation_settings": {"n_ctx": 0}})

    async def models(_: Request) -> JSONResponse:
        return JSONResponse({"data": [{"id": ALIAS, "meta": {"n_ctx": 0}}]})

    async def completions(_: Request) -> JSONResponse:
        return JSONResponse({"usage": {"completion_tokens": minimal.COMPLETION_TOKENS}})

    return Starlette(
        routes=[
            Route("/props", props),
            Route("/v1/models", models),
            Route("/v1/completions", completions, methods=["POST"]),
        ]
    )


def _window_check(
    member_props: tuple[int, dict[str, Any]], monkeypatch: pytest.MonkeyPatch, busy: int = 0
) -> Any:
    monkeypatch.setattr(minimal, "MEMBER_PAUSE_S", 0.01)
    with serving(router_app(member_props, busy)) as url:
        result = minimal.run_contract(url, alias=ALIAS, ctx_per_slot=4096, service="group")
    [check] = [c for c in result.checks if c.name == "context per slot"]
    return result, check


def test_an_unreadable_member_window_fails_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    result, check = _window_check((503, {"error": "loading"}), monkeypatch)
    assert not check.ok and not result.ok
    assert "did not report its window" in check.detail and "4096" in check.detail


def test_a_members_window_is_checked_against_the_fleet(monkeypatch: pytest.MonkeyPatch) -> None:
    right, check = _window_check(
        (200, {"default_generation_settings": {"n_ctx": 4096}}), monkeypatch
    )
    assert check.ok and right.ok
    wrong, check = _window_check(
        (200, {"default_generation_settings": {"n_ctx": 2048}}), monkeypatch
    )
    assert not check.ok and "reports n_ctx 2048 per slot" in check.detail


WINDOW = (200, {"default_generation_settings": {"n_ctx": 4096}})


def test_a_busy_routers_props_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # A router whose own /props answered 503 once was taken for a plain server and its
    # member's window went unchecked (a silent pass, seen on a loaded host).
    result, check = _window_check(WINDOW, monkeypatch, busy=3)
    assert check.ok and result.ok and "reports n_ctx 4096" in check.detail


def test_a_router_whose_props_never_answers_fails_the_gate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result, check = _window_check(WINDOW, monkeypatch, busy=10_000)
    assert not check.ok and not result.ok
    assert "/props did not answer" in check.detail and "4096" in check.detail
