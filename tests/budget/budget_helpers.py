"""Shared by the budget tests: the real model (``GEMMA``, from tests/helpers/real_model.py),
captured logs, a fleet around the real file."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from helpers.real_model import GEMMA

MIB = 1 << 20
DATA = Path(__file__).parent / "data"
needs_gemma = pytest.mark.usefixtures("gemma_file")  # assembled once per machine, never skipped


def write_fleet(tmp_path: Path, service: dict[str, object], **extra: object) -> Path:
    """A fleet whose model ``gemma`` is the real file (a path source) on host ``box``."""
    data: dict[str, object] = {
        "version": 1,
        "hosts": {"box": {"address": "localhost", "devices": [
            {"name": "cpu0", "vendor": "cpu", "memory": "2GiB"},
        ]}},
        "runtimes": {"llama": {"kind": "llama.cpp", "binary": "/usr/bin/true"}},
        "models": {"gemma": {
            "source": {"path": str(GEMMA.parent)},
            "files": [{"path": GEMMA.name, "size": 253113024}],
        }},
        "services": {"svc": {
            "host": "box", "runtime": "llama", "model": "gemma", "port": 8080,
            "ctx_per_slot": 4096, "parallel": 2, "devices": ["cpu0"], **service,
        }},
    }  # fmt: skip
    for key, value in extra.items():
        data[key] = value
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class RangeServer(ThreadingHTTPServer):
    """Serves files from disk on 127.0.0.1 with Range support, counting requests."""

    daemon_threads = True

    def __init__(self, files: dict[str, Path]) -> None:
        super().__init__(("127.0.0.1", 0), _RangeHandler)
        self.files = files
        self.requests: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _RangeHandler(BaseHTTPRequestHandler):
    server: RangeServer

    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        path = self.server.files.get(self.path.split("?")[0])
        if path is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        size = path.stat().st_size
        match = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        start, end = (
            (int(match.group(1)), min(int(match.group(2)) + 1, size)) if match else (0, size)
        )
        self.send_response(206 if match else 200)
        if match:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.send_header("Content-Length", str(end - start))
        self.end_headers()
        with path.open("rb") as handle:
            handle.seek(start)
            try:
                self.wfile.write(handle.read(end - start))
            except (BrokenPipeError, ConnectionResetError):
                return


@contextlib.contextmanager
def serving(files: dict[str, Path]) -> Iterator[RangeServer]:
    server = RangeServer(files)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
