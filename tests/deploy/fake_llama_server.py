"""A stand-in for llama-server in deploy fault tests: a real process on a real port.

It takes llama-server's command line (and ignores what it does not need) plus
fault switches a test puts in the service's extra_args:

  --x-loading SECONDS    answer /health with 503 "Loading model" that long
  --x-die-after SECONDS  print a fatal line and exit with status 3 after that long
  --x-bad-bytes          print a line that is not UTF-8 once listening (for log readers)

It honours the contract probe a deploy runs after health: ``/v1/models``
lists ``--alias`` with ``n_ctx`` = ``--ctx-size / --parallel`` per slot (L-25),
and a completion returns as many tokens as asked for.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--alias", default="fake")
parser.add_argument("--ctx-size", "-c", type=int, default=4096)
parser.add_argument("--parallel", "-np", type=int, default=1)
parser.add_argument("--x-loading", type=float, default=0.0)
parser.add_argument("--x-die-after", type=float, default=None)
parser.add_argument("--x-bad-bytes", action="store_true")
args, _ignored = parser.parse_known_args()
started = time.monotonic()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        loading = time.monotonic() - started < args.x_loading
        body: dict[str, object] = (
            {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
            if loading
            else {"status": "ok", "alias": args.alias}
        )
        if not loading and self.path.startswith("/v1/models"):
            per_slot = args.ctx_size // max(1, args.parallel)
            body = {"data": [{"id": args.alias, "meta": {"n_ctx": per_slot}}]}
        self._answer(503 if loading else 200, body)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        try:
            asked = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            asked = {}
        tokens = int(asked.get("max_tokens") or 16) if isinstance(asked, dict) else 16
        self._answer(
            200, {"choices": [{"text": " x" * tokens}], "usage": {"completion_tokens": tokens}}
        )

    def _answer(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a: object) -> None:
        pass


if args.x_die_after is not None:

    def die() -> None:
        time.sleep(args.x_die_after)
        print("fatal: failed to load model: tensor type 103 unknown", file=sys.stderr, flush=True)
        os._exit(3)

    threading.Thread(target=die, daemon=True).start()
server = ThreadingHTTPServer((args.host, args.port), Handler)
print(f"fake llama-server listening on {args.host}:{args.port}", flush=True)
if args.x_bad_bytes:
    sys.stdout.flush()
    sys.stdout.buffer.write(b"not utf-8: \xff\xfe end\n")
    sys.stdout.buffer.flush()
server.serve_forever()
