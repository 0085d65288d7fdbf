"""The relay's ASGI application: Alertmanager webhooks in, one command run per alert.

``POST /alerts`` takes Alertmanager's webhook (version 4). It answers 200
once the alerts are queued, 400 for a body that is not a notification (not
retried), 401 without the expected bearer token, 413 for an oversized body
and 503 when the queue is full (Alertmanager retries those). ``GET
/deliveries`` lists the recent runs and their exit codes.
"""

from __future__ import annotations

import hmac

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from inferfleet.relay.runner import CommandRunner, QueueFull
from inferfleet.relay.webhook import MAX_BODY, PayloadError, parse

ALERTS_PATH = "/alerts"


async def _body(request: Request) -> bytes | None:
    """The request body, or None as soon as it passes MAX_BODY (never buffered past it)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(runner: CommandRunner, *, token: str | None = None) -> Starlette:
    """The relay for ``runner``; with ``token``, requests need ``Authorization: Bearer TOKEN``."""
    expected = None if token is None else f"Bearer {token}".encode()

    async def alerts(request: Request) -> Response:
        if expected is not None:
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        body = await _body(request)
        if body is None:
            return JSONResponse({"error": f"body larger than {MAX_BODY} bytes"}, status_code=413)
        try:
            notification = parse(body)
        except PayloadError as exc:
            return JSONResponse({"error": exc.render()}, status_code=400)
        try:
            queued = runner.submit(notification)
        except QueueFull as exc:
            return JSONResponse({"error": exc.render()}, status_code=503)
        return JSONResponse({"queued": queued, "truncated": notification.truncated})

    def deliveries(_request: Request) -> Response:
        return JSONResponse({"deliveries": [d.to_json() for d in runner.history()]})

    def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route(ALERTS_PATH, alerts, methods=["POST"]),
            Route("/deliveries", deliveries),
            Route("/healthz", healthz),
        ]
    )
