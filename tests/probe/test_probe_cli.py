"""`inferfleet probe` without a model server: loading, absent (L-34)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers import free_port, server_script
from helpers.real_server import fleet_data, write_fleet

from inferfleet.io import process


@pytest.mark.parametrize("by_url", [False, True])
def test_L34_a_loading_server_fails_health_and_nothing_else_is_asked(
    cli: Callable[..., Any], port: int, reap: list[Any], tmp_path: Path, by_url: bool
) -> None:
    proc = process.spawn_detached(
        [*server_script("health_server.py"), str(port), "--loading", "120"],
        log_path=tmp_path / "health.log",
    )
    reap.append(psutil.Process(proc.pid))
    fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(port))
    _wait_listening(port)
    args = [f"http://127.0.0.1:{port}"] if by_url else ["gemma", "--file", str(fleet)]
    result = cli("probe", *args)
    assert result.code == 1
    assert "503: the server is still loading its model" in result.stdout
    assert "never kill a loading server" in result.stdout  # the hint, under the failure
    assert "model id listed" not in result.stdout  # nothing else was asked (L-34)


def test_a_probe_of_nothing_says_no_answer(cli: Callable[..., Any], tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port()))
    result = cli("probe", "gemma", "--file", str(fleet), "--json")
    doc = json.loads(result.stdout)
    assert result.code == 1 and doc["ok"] is False
    assert [(c["id"], c["status"]) for c in doc["checks"]] == [("health", "fail")]
    assert doc["checks"][0]["evidence"][0]["status"] is None


def _wait_listening(port: int) -> None:
    for _ in range(200):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")
