"""Helpers shared by tests (importable as `helpers`; tests/ is on pytest's pythonpath)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_script(name: str) -> list[str]:
    """argv of one of the small real servers under tests/fixtures/servers."""
    return [sys.executable, str(FIXTURES / "servers" / name)]


def no_process_on(port_number: int) -> bool:
    """True when nothing listens on the TCP port."""
    return not any(
        c.laddr and c.laddr.port == port_number and c.status == psutil.CONN_LISTEN
        for c in psutil.net_connections(kind="tcp")
    )
