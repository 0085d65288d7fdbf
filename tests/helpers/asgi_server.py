"""An ASGI app (the board, the relay) served by uvicorn on a free loopback port, in this process.

The socket is bound by the same ``web_server.bind`` the CLI uses; the
server runs in a thread and is stopped (and joined) when the block ends, so
tests talk to the real server over real TCP while still holding the app's
objects (a relay's runner, a board's snapshots).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from inferfleet.status.web_server import bind, url_of


@contextlib.contextmanager
def serving(app: ASGIApp, address: str = "127.0.0.1") -> Iterator[str]:
    """The server's base URL (``http://127.0.0.1:PORT``) while the block runs."""
    sock = bind(address, 0)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="auto")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        yield url_of(sock)
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def openai_app(complete: Callable[[Request], Awaitable[Response]], model: str) -> Starlette:
    """An OpenAI-compatible stand-in: /health, /v1/models listing ``model``, and both
    completion routes answered by ``complete``."""

    async def models(_: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": model}]})

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/v1/chat/completions", complete, methods=["POST"]),
            Route("/v1/completions", complete, methods=["POST"]),
        ]
    )
