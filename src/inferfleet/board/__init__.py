"""The status board: a local web page of the fleet's status, polled live.

``create_app`` builds the ASGI application (Starlette): the page, its own
script and style (no CDN, no internet), and ``/api/status``, the
``inferfleet.status/v2`` document the page polls. ``serve`` runs it with
uvicorn on a socket bound here, so a taken port is a clear error.
"""

from __future__ import annotations

from inferfleet.board.app import create_app
from inferfleet.board.server import BoardError, serve

__all__ = ["BoardError", "create_app", "serve"]
