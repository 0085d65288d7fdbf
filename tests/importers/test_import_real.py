"""A llama-swap config that runs the real llama-server, imported, then run by inferfleet.

The original command line (as llama-swap would start it) and the imported
service (as `inferfleet up` starts it) both run on the real Gemma 3 270M
model: the imported server's process runs exactly `show`'s argv, and both
servers report the same window per slot and the same number of slots.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from helpers import free_port
from helpers.cli import CliResult
from helpers.real_server import SERVICE, fleet_data, served, write_fleet

from inferfleet.backends import health as gate
from inferfleet.deploy import local
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.io import process

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
Cli = Callable[..., CliResult]


@contextlib.contextmanager
def started(argv: list[str], port: int, log: Path) -> Iterator[int]:
    """The original command line, spawned as llama-swap spawns it; stopped by pid."""
    proc = process.spawn_detached(argv, log_path=log, env=dict(os.environ))
    try:
        gate.wait_healthy(
            proc, service="original", bind="127.0.0.1", port=port, path="/health",
            timeout=300.0, log_path=log,
        )  # fmt: skip
        yield proc.pid
    finally:
        process.terminate(proc)


def window(port: int) -> tuple[int, int]:
    """(per-slot window, slots) as the server itself reports them."""
    props = httpx.get(f"http://127.0.0.1:{port}/props", timeout=10).json()
    return props["default_generation_settings"]["n_ctx"], props["total_slots"]


def test_imported_llama_swap_service_runs_what_llama_swap_ran(cli: Cli, tmp_path: Path) -> None:
    # Where the real binary and model live (built and verified once, cached).
    example = write_fleet(tmp_path / "example" / "fleet.yaml", fleet_data(free_port()))
    prepared = local.prepare(load_fleet(example), SERVICE, local.Hooks())
    binary = prepared.argv[0]
    model = prepared.argv[prepared.argv.index("--model") + 1]
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"""\
startPort: {port}
macros:
  "llama": {binary} --port ${{PORT}}
models:
  "{SERVICE}":
    cmd: |
      ${{llama}}
      -m {model}
      -c 4096 -np 2
      --temp 0.7
    checkEndpoint: /health
"""
    )
    out = tmp_path / "fleet" / "fleet.yaml"
    out.parent.mkdir()
    result = cli("import", "llama-swap", str(config), "--out", str(out))
    assert result.code == 0, result.stdout + result.stderr
    assert f"same argv {SERVICE}" in result.stdout
    shown = cli("show", SERVICE, "-f", str(out), "--json").document()["argv"]

    original = [binary, "--port", str(port), "-m", model, "-c", "4096", "-np", "2", "--temp", "0.7"]
    with started(original, port, tmp_path / "original.log"):
        before = window(port)
    with served(out, tmp_path / "state") as running:
        assert running.port == port
        assert psutil_cmdline(running.pid) == shown
        assert window(port) == before == (2048, 2)


def psutil_cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
