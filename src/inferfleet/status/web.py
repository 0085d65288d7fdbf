"""The board's ASGI application: one page, its script and style, and the status JSON.

The page is static; its script polls ``/api/status`` and draws the fleet
(sections for LLM endpoints, other services and hosts) with DOM calls only,
never by pasting server text as HTML. The fleet is read in the background,
once per interval, whatever the number of open pages (:class:`Snapshots`),
and only requests naming the board by an allowed host are answered
(``web_server.HostCheck``: DNS rebinding cannot read the fleet). A
Content-Security-Policy of ``'self'`` keeps the page from loading anything
off this board, so it works on a machine with no internet and cannot leak a
request elsewhere.
"""

from __future__ import annotations

import contextlib
import html
import threading
import time
from collections.abc import AsyncIterator, Sequence
from importlib import resources
from string import Template

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from inferfleet import __version__
from inferfleet.documents import StatusDocument
from inferfleet.errors import FleetError
from inferfleet.status import Collector
from inferfleet.status.web_server import HostCheck

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


class Snapshots:
    """The fleet's status collected in the background; every poll gets the last snapshot.

    However many tabs poll and however often, the fleet is read (HTTP to
    every service, ssh to every remote host) at most once per ``every``
    seconds. Collecting starts with the first poll and pauses once nobody
    has polled for ``idle`` seconds, so an unwatched board fans out nothing;
    a poll after such a pause waits (up to ``wait`` seconds) for a fresh
    collection rather than showing a stale one. A collection that raises
    keeps the previous snapshot and is reported with the next poll.
    """

    def __init__(
        self,
        collector: Collector,
        hosts: Sequence[str] | None,
        every: float,
        *,
        idle: float | None = None,
        wait: float = 30.0,
    ) -> None:
        self.collector = collector
        self.hosts = list(hosts) if hosts else None
        self.every = every
        self.idle = max(30.0, 5 * every) if idle is None else idle
        self.wait = wait
        self.collections = 0
        self._lock = threading.Lock()
        self._wanted = threading.Event()  # someone polled within `idle` seconds
        self._fresh = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._doc: StatusDocument | None = None
        self._at = 0.0  # monotonic time of the last snapshot
        self._error = ""
        self._polled = 0.0
        self._thread: threading.Thread | None = None

    def document(self) -> tuple[StatusDocument | None, str]:
        """The last snapshot (None before the first one) and the last collection's error."""
        with self._lock:
            now = time.monotonic()
            self._polled = now
            self._wanted.set()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="board-collect", daemon=True)
                self._thread.start()
            deadline = now + self.wait
            # Before the first snapshot, or after a pause: wait for a fresh one.
            while (self._doc is None or now - self._at > self.idle) and not self._stop.is_set():
                if not self._fresh.wait(max(0.0, deadline - now)) or self._error:
                    break
                now = time.monotonic()
            return self._doc, self._error

    def close(self, grace: float = 5.0) -> None:
        self._stop.set()
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(grace)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wanted.wait()
            if self._stop.is_set():
                return
            started = time.monotonic()
            self._collect()
            with self._lock:
                if time.monotonic() - self._polled > self.idle:
                    self._wanted.clear()  # nobody is looking: stop reading the fleet
            self._stop.wait(max(0.0, self.every - (time.monotonic() - started)))

    def _collect(self) -> None:
        try:
            doc = self.collector.collect(self.hosts).document(version=__version__)
            error = ""
        except Exception as exc:  # the board keeps serving its last snapshot
            doc = None
            error = exc.render() if isinstance(exc, FleetError) else f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.collections += 1
            if doc is not None:
                self._doc, self._at = doc, time.monotonic()
            self._error = error
            self._fresh.notify_all()


def create_app(
    collector: Collector,
    *,
    hosts: Sequence[str] | None = None,
    interval: float = 2.0,
    title: str = "inferfleet board",
    allow_hosts: Sequence[str] = (),
) -> Starlette:
    """The board for ``collector``'s fleet; the page polls every ``interval`` seconds.

    The fleet is collected in the background once per ``interval`` (see
    :class:`Snapshots`, at ``app.state.snapshots``); requests must name the
    board by an IP address, ``localhost`` or one of ``allow_hosts``.
    """
    collector.hosts(hosts)  # unknown host names fail here, before serving
    snapshots = Snapshots(collector, hosts, every=interval)
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
        # A sync endpoint: Starlette runs it in its thread pool, so waiting for the
        # first snapshot never blocks the event loop serving other requests.
        doc, error = snapshots.document()
        headers = {**HEADERS, "Cache-Control": "no-store"}
        if doc is None:
            reason = error or f"no status collected within {snapshots.wait:g} s"
            return JSONResponse({"error": reason}, status_code=503, headers=headers)
        return JSONResponse(doc, headers=headers)

    def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "ok"}, headers=HEADERS)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        snapshots.close()

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/static/{name}", static),
            Route("/api/status", status),
            Route("/healthz", healthz),
        ],
        middleware=[Middleware(HostCheck, allow=list(allow_hosts))],
        lifespan=lifespan,
    )
    app.state.snapshots = snapshots
    return app
