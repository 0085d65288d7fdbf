"""Serving an ASGI app with uvicorn on a socket bound here, for this machine's eyes.

Binding before uvicorn starts turns a taken port into one clear error (and
lets ``--port 0`` pick a free port whose URL is printed), instead of a log
line from inside the server.

:class:`HostCheck` wraps the board and the relay: a request must name the
server by an IP address, ``localhost`` or a name given with ``--allow-host``.
DNS rebinding (a hostile page whose name is re-pointed at 127.0.0.1, so the
browser lets it read the answers) always arrives with the attacker's name in
``Host``, so it gets a 421 and no data. An IP address in ``Host`` is safe to
serve: the page that sent it has that address as its own origin.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable

import uvicorn
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from inferfleet.errors import FleetError


class BoardError(FleetError, OSError):
    """A local web endpoint (board, relay) cannot listen where it was asked to."""


LOOPBACK_NAMES = frozenset({"localhost"})


def host_name(header: str) -> str:
    """The name in a ``Host`` header: no port, no IPv6 brackets, no trailing dot, lower case."""
    value = header.strip().lower()
    if value.startswith("["):
        value = value[1 : value.find("]")] if "]" in value else value[1:]
    elif value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


class HostCheck:
    """ASGI middleware: only requests that name this server by an allowed host reach ``app``."""

    def __init__(self, app: ASGIApp, allow: Iterable[str] = ()) -> None:
        self.app = app
        self.allow = LOOPBACK_NAMES | {host_name(name) for name in allow} - {""}

    def allowed(self, header: str) -> bool:
        """Whether a request with this ``Host`` header names this server."""
        name = host_name(header)
        if name in self.allow:
            return True
        try:  # any IP address: no rebinding attack can put one in Host
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            if not self.allowed(Headers(scope=scope).get("host", "")):
                await send({"type": "websocket.close", "code": 1008})
                return
        elif scope["type"] == "http":
            given = Headers(scope=scope).get("host", "")
            if not self.allowed(given):
                answer = PlainTextResponse(
                    f"421 misdirected request: {given[:100]!r} is not a name of this server; "
                    "use its IP address or localhost, or start it with --allow-host NAME\n",
                    status_code=421,
                    headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"},
                )
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)


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
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="auto")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
