"""The relay's ASGI application: Alertmanager webhooks in, one command run per alert.

``POST /alerts`` takes Alertmanager's webhook (version 4). It answers 200
once the alerts are queued, 400 for a body that is not a notification (not
retried), 401 without the expected bearer token, 413 for an oversized body,
415 for a body that is not declared JSON and 503 when the queue is full or
the relay is stopping (Alertmanager retries those). ``GET /deliveries``
lists the recent runs and their exit codes (behind the same token);
``GET /healthz`` answers 503 once the delivery worker is not running.

A browser can be made to POST a form anywhere (``text/plain``, urlencoded,
multipart) without asking the server first, but not ``application/json``:
requiring JSON keeps a hostile web page from firing the user's command, and
:class:`~inferfleet.status.web_server.HostCheck` keeps it from reading
``/deliveries`` through DNS rebinding.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from inferfleet.relay.runner import CommandRunner, QueueFull
from inferfleet.relay.webhook import MAX_BODY, PayloadError, parse
from inferfleet.status.web_server import HostCheck

ALERTS_PATH = "/alerts"
JSON_TYPES = frozenset({"application/json"})


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


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def create_app(
    runner: CommandRunner, *, token: str | None = None, allow_hosts: Sequence[str] = ()
) -> Starlette:
    """The relay for ``runner``; with ``token``, requests need ``Authorization: Bearer TOKEN``.

    Requests must name the relay by an IP address, ``localhost`` or one of
    ``allow_hosts`` (Alertmanager on another machine uses the relay's IP).
    """
    expected = None if token is None else f"Bearer {token}".encode()

    def refused(request: Request) -> Response | None:
        if expected is None:
            return None
        given = request.headers.get("authorization", "").encode()
        if hmac.compare_digest(given, expected):
            return None
        return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)

    async def alerts(request: Request) -> Response:
        denied = refused(request)
        if denied is not None:
            return denied
        if _media_type(request) not in JSON_TYPES:
            return JSONResponse(
                {"error": "the body must be sent as Content-Type: application/json"},
                status_code=415,
            )
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

    def deliveries(request: Request) -> Response:
        denied = refused(request)
        if denied is not None:
            return denied
        return JSONResponse({"deliveries": [d.to_json() for d in runner.history()]})

    def healthz(_request: Request) -> Response:
        if not runner.alive():
            return JSONResponse({"status": "down", "error": runner.why_stopped()}, 503)
        return JSONResponse({"status": "ok", "queued": runner.queued()})

    return Starlette(
        routes=[
            Route(ALERTS_PATH, alerts, methods=["POST"]),
            Route("/deliveries", deliveries),
            Route("/healthz", healthz),
        ],
        middleware=[Middleware(HostCheck, allow=list(allow_hosts))],
    )
