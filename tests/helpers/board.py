"""The board as users run it (``inferfleet board`` in its own process) and the system Chromium.

Both stopped whatever happens: the board by its pid (L-43), the browser by Playwright.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from helpers import free_port
from helpers.real_server import wait_for
from inferfleet.io import process

CHROMIUM = "/usr/bin/chromium"
BOARD = (
    "import sys; from inferfleet.cli import app; "
    "app.VERBS.setdefault('board', ('board_cmd', 'register')); app.main()"
)


@contextlib.contextmanager
def board(fleet: Path, results: Path, log: Path) -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, "-c", BOARD, "board", "--file", str(fleet), "--port", str(port)]
    argv += ["--interval", "0.5", "--results", str(results)]
    proc = process.spawn_detached(argv, log_path=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for("the board", lambda: answers(f"{url}/healthz"), timeout=60)
        yield url
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate(proc, grace=10.0)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.TransportError:
        return False


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: apt-get install --no-install-recommends chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # The system browser: nothing is ever downloaded (never `playwright install`).
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"],
        )  # fmt: skip
        try:
            yield launched
        finally:
            launched.close()
