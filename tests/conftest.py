"""Shared fixtures: isolated state, a CLI runner, free ports, real processes.

Every test gets its own INFERFLEET_STATE_DIR so records and logs never leak
between tests or into the user's real state. The cache dir (llama-server
builds, assembled models) is shared on purpose: it is content-addressed and
verified, and rebuilding llama-server per test would take hours.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from helpers import FIXTURES, ROOT, free_port, no_process_on, server_script  # noqa: F401


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


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> object:
    """Run the real entry point (`main`) in-process; returns exit code and output."""
    from inferfleet.cli.app import main

    def run(*args: str) -> CliResult:
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "argv", ["inferfleet", *args])
        # Wide fake terminal so rich does not wrap long messages mid-word.
        monkeypatch.setenv("COLUMNS", "250")
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return CliResult(code, out.getvalue(), err.getvalue())

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
