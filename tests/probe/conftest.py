"""Fixtures for the probe tests: the real server and a CLI that knows `probe`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_server_fixtures import cli_verbs, server  # noqa: E402, F401
