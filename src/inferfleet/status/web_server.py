"""Serving an ASGI app with uvicorn on a socket bound here.

Binding before uvicorn starts turns a taken port into one clear error (and
lets ``--port 0`` pick a free port whose URL is printed), instead of a log
line from inside the server.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

import uvicorn
from starlette.types import ASGIApp

from inferfleet.errors import FleetError


class BoardError(FleetError, OSError):
    """A local web endpoint (board, relay) cannot listen where it was asked to."""


def bind(address: str, port: int) -> socket.socket:
    """A listening TCP socket on ``address:port`` (port 0: any free port)."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    except ValueError:
        raise BoardError(
            f"{address!r} is not an IP address", hint="pass --bind 127.0.0.1 (or another IP)"
        ) from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise BoardError(
            f"cannot listen on {address}:{port}: {exc.strerror or exc}",
            hint="choose another port with --port (0 picks a free one), "
            "or stop what holds it (ss -ltnp)",
        ) from None
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def serve(
    app: ASGIApp,
    address: str,
    port: int,
    *,
    on_ready: Callable[[str], None] = lambda _url: None,
) -> None:
    """Serve ``app`` until interrupted (Ctrl-C or SIGTERM stop it cleanly)."""
    sock = bind(address, port)
    try:
        on_ready(url_of(sock))
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
