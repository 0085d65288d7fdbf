"""The real llama-server on the real model (Gemma 3 270M Q4_K_M).

The runtime is built through inferfleet's own installer (cached under the
user's cache dir, so only the first run pays the ~10 minute build) and the
model assembled from its PyPI package by inferfleet's own gate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml

from inferfleet.cli.fleet_cmds import embedded_example

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="session")
def llama_server(llama_server_binary: Path) -> Path:
    """The pinned build (tests/helpers/real_model.py), under the name these tests use."""
    return llama_server_binary


@pytest.fixture
def local_fleet(tmp_path: Path, port: int, llama_server: Path) -> Path:
    """The embedded example on a free port, as a user's own fleet.yaml."""
    data = yaml.safe_load(embedded_example().read_text())
    data["services"]["gemma"]["port"] = port
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def servers_of(local_fleet: Path) -> Iterator[list[int]]:
    """Pids the test saw; any still alive at the end are killed by pid (and fail the test)."""
    pids: list[int] = []
    yield pids
    leftovers = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                leftovers.append(pid)
                proc.kill()
    assert not leftovers, f"orphaned servers left running: {leftovers}"
