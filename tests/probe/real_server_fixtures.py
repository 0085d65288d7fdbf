"""Fixtures shared by the probe and bench tests: the real server and a CLI with both verbs.

Each of those folders' conftest imports them, so pytest registers them there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from real_server import Running, running_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """One real llama-server per test module (ctx 4096 per slot x 2 slots)."""
    with running_server(tmp_path_factory.mktemp("llama")) as running:
        yield running


@pytest.fixture
def cli_verbs(cli: Callable[..., object]) -> Callable[..., object]:
    """The real entry point, with `probe` and `bench` registered if app.py does not yet."""
    from inferfleet.cli import bench_cmd, probe_cmd
    from inferfleet.cli.app import app

    names = {c.name for c in app.registered_commands}
    if "probe" not in names:
        probe_cmd.register(app)
    if "bench" not in names:
        bench_cmd.register(app)
    return cli
