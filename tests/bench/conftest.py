"""Fixtures for the bench tests: the real server and a CLI that knows `bench`."""

from __future__ import annotations

import sys
from pathlib import Path

# The real-server helper and its fixtures are shared with the probe tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "probe"))
from real_server_fixtures import cli_verbs, server  # noqa: E402, F401
