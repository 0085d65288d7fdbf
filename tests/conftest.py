"""Shared fixtures: isolated state, a CLI runner, free ports, real processes, the real server.

Every test gets its own INFERFLEET_STATE_DIR so records and logs never leak
between tests or into the user's real state. The cache dir (llama-server
builds, assembled models) is shared on purpose: it is content-addressed and
verified, and rebuilding llama-server per test would take hours.

The helpers behind these fixtures live once in tests/helpers/ (importable as
``helpers``: tests/ is on pytest's pythonpath).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from helpers import free_port
from helpers.cli import CliResult, run_cli
from helpers.real_model import gemma, llama_server
from helpers.real_server import Running, running_server

# The skip gate (a skip is a decision, not an accident) and the needs_root marker's skip:
# tests/helpers/skip_gate.py.
pytest_plugins = ("helpers.skip_gate",)


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("INFERFLEET_STATE_DIR", str(state))
    monkeypatch.delenv("INFERFLEET_DEBUG", raising=False)
    # Remote requests honour proxies (io/http.py); every test server is on loopback.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return state


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """Run the real entry point (`main`) in-process; returns exit code and output."""

    def run(*args: str) -> CliResult:
        return run_cli(monkeypatch, *args)

    return run


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def reap() -> Iterator[list[psutil.Process]]:
    """Processes a test starts are registered here and killed by pid afterwards."""
    started: list[psutil.Process] = []
    yield started
    for proc in started:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="session")
def gemma_file() -> Path:
    """The real test model, assembled and verified once per machine (never skips)."""
    return gemma()


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    """The pinned llama-server, built once per machine (never skips)."""
    return llama_server()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """One real llama-server per test module (ctx 4096 per slot x 2 slots), stopped by pid."""
    with running_server(tmp_path_factory.mktemp("llama")) as running:
        yield running
