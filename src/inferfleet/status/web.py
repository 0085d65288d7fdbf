"""The board's ASGI application: one page, its script and style, and the status JSON.

The page is static; its script polls ``/api/status`` and draws the fleet
(sections for LLM endpoints, other services and hosts) with DOM calls only,
never by pasting server text as HTML. A Content-Security-Policy of
``'self'`` keeps the page from loading anything off this board, so it works
on a machine with no internet and cannot leak a request elsewhere.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Sequence
from importlib import resources
from string import Template

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from inferfleet import __version__
from inferfleet.documents import StatusDocument
from inferfleet.status import Collector

STATIC = {
    "board.js": "text/javascript; charset=utf-8",
    "board.css": "text/css; charset=utf-8",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _resource(name: str) -> str:
    return resources.files("inferfleet.status").joinpath("static", name).read_text("utf-8")


class StatusCache:
    """One collection serves every poll within ``max_age`` seconds (several tabs, one read)."""

    def __init__(self, collector: Collector, hosts: Sequence[str] | None, max_age: float) -> None:
        self.collector = collector
        self.hosts = list(hosts) if hosts else None
        self.max_age = max_age
        self._lock = threading.Lock()
        self._doc: StatusDocument | None = None
        self._at = 0.0

    def document(self) -> StatusDocument:
        with self._lock:
            if self._doc is not None and time.monotonic() - self._at < self.max_age:
                return self._doc
            status = self.collector.collect(self.hosts)
            self._doc = status.document(version=__version__)
            self._at = time.monotonic()
            return self._doc


def create_app(
    collector: Collector,
    *,
    hosts: Sequence[str] | None = None,
    interval: float = 2.0,
    title: str = "inferfleet board",
) -> Starlette:
    """The board for ``collector``'s fleet; the page polls every ``interval`` seconds."""
    collector.hosts(hosts)  # unknown host names fail here, before serving
    cache = StatusCache(collector, hosts, max_age=max(0.2, interval / 2))
    page = Template(_resource("index.html")).substitute(
        title=html.escape(title),
        interval=html.escape(f"{interval:g}"),
        fleet=html.escape(str(collector.loaded.path)),
        version=html.escape(__version__),
    )
    assets = {name: _resource(name) for name in STATIC}

    def index(_request: Request) -> Response:
        return HTMLResponse(page, headers={**HEADERS, "Cache-Control": "no-store"})

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return Response("not found\n", status_code=404, headers=HEADERS)
        return Response(assets[name], media_type=STATIC[name], headers=HEADERS)

    def status(_request: Request) -> Response:
        # A sync endpoint: Starlette runs it in its thread pool, so a slow host
        # (ssh, HTTP timeouts) never blocks the event loop serving other polls.
        return JSONResponse(cache.document(), headers={**HEADERS, "Cache-Control": "no-store"})

    def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "ok"}, headers=HEADERS)

    return Starlette(
        routes=[
            Route("/", index),
            Route("/static/{name}", static),
            Route("/api/status", status),
            Route("/healthz", healthz),
        ]
    )
