"""The real llama-server on the real model, started the way users start it: ``inferfleet up``.

``local.up`` (process backend) builds nothing here (the runtime is cached),
verifies the model by sha256 and records the server's pid in the state dir,
so the status collector and the board see exactly what a user's machine
would have. The server is always stopped by its recorded pid (L-43).
Shared by the board, monitoring and relay tests (tests/ is on the path).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import yaml

from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.deploy import local
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.io import process

SERVICE = "gemma"
ALIAS = "gemma3-270m"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fleet_data(port: int) -> dict[str, Any]:
    """The embedded example fleet (Gemma 3 270M, 4096 per slot x 2) on ``port``."""
    data: dict[str, Any] = yaml.safe_load(embedded_example().read_text())
    data["services"][SERVICE]["port"] = port
    return data


def write_fleet(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class Served:
    loaded: LoadedFleet
    port: int
    pid: int
    state_dir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """Stop the server by its pid, as a crash would: the record stays behind."""
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate(psutil.Process(self.pid), grace=5.0)


@contextlib.contextmanager
def state_dir(path: Path) -> Iterator[Path]:
    """INFERFLEET_STATE_DIR set to ``path`` for the block (records, logs, markers)."""
    old = os.environ.get("INFERFLEET_STATE_DIR")
    os.environ["INFERFLEET_STATE_DIR"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("INFERFLEET_STATE_DIR", None)
        else:
            os.environ["INFERFLEET_STATE_DIR"] = old


@contextlib.contextmanager
def served(fleet_file: Path, state: Path) -> Iterator[Served]:
    """``inferfleet up`` of the fleet's gemma service; stopped by pid whatever happens."""
    with state_dir(state):
        loaded = load_fleet(fleet_file)
        service = loaded.fleet.services[SERVICE]
        [result] = local.up(loaded, [SERVICE], local.Hooks(), contract=False)
        assert result.pid is not None
        running = Served(loaded, service.port, result.pid, state)
        try:
            yield running
        finally:
            running.kill()
            local.down(loaded, SERVICE, grace=5.0)  # removes the record; never signals a stranger


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0, every: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
