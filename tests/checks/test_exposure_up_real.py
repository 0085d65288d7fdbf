"""L-58 on a real server: what ``up`` starts listens exactly where the exposure allows.

The real llama-server on the real model, started by ``inferfleet up``
(``local.up``, process backend): with the default ``loopback`` exposure its
only listening socket is on 127.0.0.1; with ``lan`` and a reason it listens
on the declared address (127.0.0.2 here, a loopback alias: the tests talk to
loopback only) and nowhere else. A bind beyond loopback under a loopback
exposure is refused before anything starts. Sockets are read from the
kernel with psutil, not from the argv.
"""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from helpers.real_server import SERVICE, fleet_data, served, write_fleet

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def listening(pid: int) -> set[tuple[str, int]]:
    """The (address, port) pairs the process listens on, as the kernel reports them."""
    connections = psutil.Process(pid).net_connections(kind="inet")
    return {(c.laddr.ip, c.laddr.port) for c in connections if c.status == psutil.CONN_LISTEN}


def refused(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(5.0)
        return sock.connect_ex((address, port)) == errno.ECONNREFUSED


def test_a_loopback_service_listens_on_127_0_0_1_only(tmp_path: Path, port: int) -> None:
    fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(port, exposure="loopback"))
    with served(fleet, tmp_path / "state") as running:
        assert listening(running.pid) == {("127.0.0.1", port)}
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
        assert refused("127.0.0.2", port)  # another loopback address: nobody there


def test_a_lan_service_listens_on_its_declared_address_only(tmp_path: Path, port: int) -> None:
    exposure = {"level": "lan", "reason": "the test reaches it on its declared address"}
    data = fleet_data(port, bind="127.0.0.2", exposure=exposure)
    fleet = write_fleet(tmp_path / "fleet.yaml", data)
    with served(fleet, tmp_path / "state") as running:
        assert listening(running.pid) == {("127.0.0.2", port)}
        assert httpx.get(f"http://127.0.0.2:{port}/health", timeout=10).status_code == 200
        assert refused("127.0.0.1", port)


def test_up_refuses_a_wide_bind_under_a_loopback_exposure_and_starts_nothing(
    cli: Any, tmp_path: Path, port: int, _isolated_state: Path
) -> None:
    fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(port, bind="0.0.0.0"))
    result = cli("up", str(fleet), "--json")
    assert result.code == 2, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert f"services.{SERVICE}.bind: service {SERVICE!r} binds 0.0.0.0" in message
    assert "exposure is loopback" in message and "(L-58)" in message
    assert "Traceback" not in result.stderr
    assert not list((_isolated_state / "services").glob("*.json"))  # no record: nothing started
    assert refused("127.0.0.1", port)
