"""The real llama-server on the real model (Gemma 3 270M), for every test that needs one.

Two ways to start it, both on a free port and always stopped by pid (L-43):

- :func:`served` starts it the way users do, ``inferfleet up`` (``local.up``,
  process backend): the model is verified by sha256 and the pid recorded in
  the state dir, so status, the board and monitoring see what a user's
  machine would have;
- :func:`running_server` spawns the prepared argv directly (optionally with
  flags dropped), for the probe and bench tests that need a server without
  inferfleet's record of it.

The runtime is built once and cached; nothing here builds it per test.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import yaml

from helpers import free_port
from inferfleet.backends import health as gate
from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.deploy import local
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.io import process

SERVICE = "gemma"
ALIAS = "gemma3-270m"


def fleet_data(port: int, **service: Any) -> dict[str, Any]:
    """The embedded example fleet (Gemma 3 270M, 4096 per slot x 2) on ``port``,
    with ``service`` keys of its one service replaced (e.g. ``client``)."""
    data: dict[str, Any] = yaml.safe_load(embedded_example().read_text())
    data["services"][SERVICE]["port"] = port
    data["services"][SERVICE].update(service)
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
def environ(**values: str) -> Iterator[None]:
    """Environment variables set for the block, then restored (for module-scoped servers,
    which monkeypatch cannot serve)."""
    old = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def state_dir(path: Path) -> Iterator[Path]:
    """INFERFLEET_STATE_DIR set to ``path`` for the block (records, logs, markers)."""
    with environ(INFERFLEET_STATE_DIR=str(path)):
        yield path


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


@dataclass(frozen=True)
class Running:
    url: str
    port: int
    pid: int
    log: Path
    fleet: Path


@contextlib.contextmanager
def running_server(
    folder: Path,
    *,
    drop_flags: tuple[str, ...] = (),
    extra: tuple[str, ...] = (),
    secrets: dict[str, str] | None = None,
    **service: Any,
) -> Iterator[Running]:
    """The example service, ctx 4096 per slot x 2 slots, spawned from its prepared argv
    (less ``drop_flags``, plus ``extra`` at the end, as extra_args would be; ``secrets``:
    what its secrets_env would hold; ``service``: keys of the service replaced, paths
    relative to ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    fleet = write_fleet(folder / "fleet.yaml", fleet_data(port, **service))
    prepared = local.prepare(load_fleet(fleet), SERVICE, local.Hooks())
    argv = [a for a in prepared.argv if a not in drop_flags] + list(extra)
    log = folder / "llama-server.log"
    env = prepared.process_env(os.environ, secrets)
    proc = process.spawn_detached(argv, log_path=log, env=env)
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
