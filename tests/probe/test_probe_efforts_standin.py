"""L-46: the effort probe against an endpoint that refuses some ``reasoning_effort`` values.

The incident: a template accepted only ``xhigh|medium|low``; clients sending
``high`` got 500. The stand-in is a small ASGI app on a loopback port whose
chat endpoint does what that template did: ``high`` answers 500 (the template
raised), ``minimal`` answers 400 (a server that validates the value before
the template), the others 200. It is a stand-in because the real 270M model's
template reads no effort at all (tests/probe/test_probe_real.py shows it
takes every value).

Mutation killed: counting any HTTP status as accepted in
``checks_features.efforts`` (``if answer.status == 200`` -> ``if True``)
makes the client map send ``high`` and ``minimal`` as themselves, and these
tests fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.asgi_server import serving
from helpers.real_server import fleet_data, write_fleet
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from test_probe_vision_standins import ALIAS, reply

# What the incident's template did with each value it was sent.
REFUSED = {"high": 500, "minimal": 400}


def refusing_app(asked: list[object]) -> Starlette:
    """A chat endpoint refusing the efforts in REFUSED; each effort asked lands in ``asked``."""

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def models(_: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": ALIAS, "object": "model"}]})

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        effort = body.get("reasoning_effort")
        asked.append(effort)
        if isinstance(effort, str) and effort in REFUSED:
            status = REFUSED[effort]
            message = f"reasoning_effort must be one of xhigh|medium|low, got {effort}"
            return JSONResponse({"error": {"message": message, "code": status}}, status)
        return reply("Hi.")

    async def missing(_: Request) -> Response:
        return JSONResponse({"error": {"message": "not found", "code": 404}}, 404)

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/{path:path}", missing, methods=["GET", "POST"]),
        ]
    )


def probe_efforts(cli: Any, tmp_path: Path, **client: Any) -> tuple[int, dict[str, Any], Any]:
    """``inferfleet probe --json`` of a reasoning service served by the refusing stand-in."""
    asked: list[object] = []
    with serving(refusing_app(asked)) as url:
        port = int(url.rsplit(":", 1)[1])
        declared = {"max_tokens": 512, "reasoning_field": "reasoning_content", **client}
        fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(port, client=declared))
        result = cli("probe", "gemma", "--file", str(fleet), "--json")
    doc = json.loads(result.stdout)
    assert {"minimal", "low", "medium", "high", "xhigh"} <= set(map(str, asked)), asked
    return result.code, doc, asked


def test_L46_refused_efforts_are_left_out_of_the_client_map(cli: Any, tmp_path: Path) -> None:
    _, doc, _ = probe_efforts(cli, tmp_path)
    (efforts,) = [c for c in doc["checks"] if c["id"] == "efforts"]
    found = doc["findings"]
    assert found["efforts_accepted"] == ["low", "medium", "xhigh"]
    assert found["efforts_refused"] == {"minimal": 400, "high": 500}
    # Each level goes out as an accepted value: the nearest, ties going up.
    assert found["effort_map"] == {
        "minimal": "low",
        "low": "low",
        "medium": "medium",
        "high": "xhigh",
        "xhigh": "xhigh",
    }
    assert set(found["effort_map"].values()) <= set(found["efforts_accepted"])
    assert efforts["status"] == "pass" and efforts["lesson"] == "L-46"
    assert "refused: minimal (400), high (500)" in efforts["summary"]
    # The server's own refusal is the evidence a reader replays.
    answers = " ".join(e["answer"] for e in efforts["evidence"])
    assert "got minimal" in answers and "got high" in answers


def test_L46_a_client_map_that_sends_a_refused_effort_fails(cli: Any, tmp_path: Path) -> None:
    """The incident's client sends ``high`` as ``high``: the probe fails and gives the map.

    Mutation killed: dropping the comparison of the declared map with the
    accepted values (the efforts check passes whenever anything is accepted).
    """
    declared = {"high": "high", "low": "low"}
    code, doc, _ = probe_efforts(cli, tmp_path, reasoning_effort=declared)
    (efforts,) = [c for c in doc["checks"] if c["id"] == "efforts"]
    assert efforts["status"] == "fail", efforts
    assert "the config sends values the template refuses: {'high': 'high'}" in efforts["summary"]
    assert "high: xhigh" in efforts["hint"] and "minimal: low" in efforts["hint"]
    assert code == 1 and doc["ok"] is False


def test_L46_a_client_map_of_accepted_values_passes(cli: Any, tmp_path: Path) -> None:
    """The control: the probed map itself is what the endpoint takes."""
    declared = {"high": "xhigh", "low": "low", "minimal": "low"}
    _, doc, _ = probe_efforts(cli, tmp_path, reasoning_effort=declared)
    (efforts,) = [c for c in doc["checks"] if c["id"] == "efforts"]
    assert efforts["status"] == "pass", efforts
