"""Fixtures for the check tests: the real entry point with the check verb on it."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def verbs(cli: Any) -> Any:
    """The `cli` fixture; app.py registers `check`."""
    return cli
