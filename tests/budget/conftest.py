"""Fixtures of the budget tests: shapes built in the test, the CLI with the budget verb."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.gguf_builder import GGUFBuilder

from inferfleet.budget import ModelShape, model_shape
from inferfleet.gguf import inspect


@pytest.fixture
def shape_of(tmp_path: Path) -> Callable[[GGUFBuilder], ModelShape]:
    """The budget shape of a header built with the GGUF builder (written, then inspected)."""
    count = 0

    def build(builder: GGUFBuilder) -> ModelShape:
        nonlocal count
        count += 1
        return model_shape(inspect(builder.write(tmp_path / f"m{count}.gguf")))

    return build


@pytest.fixture
def budget_cli(
    cli: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., object]:
    """The real entry point with the budget verb registered (as app.py will have it)."""
    from inferfleet.cli import app

    monkeypatch.setitem(app.VERBS, "budget", ("budget_cmd", "register"))
    return cli
