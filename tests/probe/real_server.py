"""A real llama-server on the real test model, for the probe and bench tests.

Started from inferfleet's own ``prepare`` (runtime built once and cached,
model materialised and verified by sha256) with the embedded example's argv
on a free port, and always stopped by its pid in a ``finally`` (L-43).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from inferfleet.backends import health as gate
from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.deploy import local
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.io import process

SERVICE = "gemma"
ALIAS = "gemma3-270m"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_fleet(path: Path, port: int, **service: Any) -> Path:
    """The embedded example on ``port``, with ``service`` keys replaced (e.g. client)."""
    data = yaml.safe_load(embedded_example().read_text())
    data["services"][SERVICE]["port"] = port
    data["services"][SERVICE].update(service)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass(frozen=True)
class Running:
    url: str
    port: int
    pid: int
    log: Path
    fleet: Path


@contextlib.contextmanager
def running_server(folder: Path, *, drop_flags: tuple[str, ...] = ()) -> Iterator[Running]:
    """The example service, ctx 4096 per slot x 2 slots, on a free port."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    fleet = write_fleet(folder / "fleet.yaml", port)
    prepared = local.prepare(load_fleet(fleet), SERVICE, local.Hooks())
    argv = [a for a in prepared.argv if a not in drop_flags]
    log = folder / "llama-server.log"
    proc = process.spawn_detached(argv, log_path=log, env=prepared.process_env(os.environ))
    try:
        gate.wait_healthy(
            proc,
            service=SERVICE,
            bind="127.0.0.1",
            port=port,
            path="/health",
            timeout=300.0,
            log_path=log,
        )
        yield Running(f"http://127.0.0.1:{port}", port, proc.pid, log, fleet)
    finally:
        process.terminate(proc)
