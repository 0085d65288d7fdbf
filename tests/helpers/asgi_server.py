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
from collections.abc import Iterator

import uvicorn
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
