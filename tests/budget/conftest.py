"""Fixtures of the budget tests: shapes built in the test."""

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
