"""Helpers shared by tests, each defined once (importable as ``helpers``: tests/ is on
pytest's pythonpath). Topic modules: ``helpers.cli`` (the in-process entry point),
``helpers.git`` (git with a fixed identity), ``helpers.real_server`` (the real
llama-server), ``helpers.prometheus``, ``helpers.sshd``, ``helpers.bench_summaries``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def ctrl_c_reaches_it() -> None:
    """``preexec_fn`` of a child a test interrupts with SIGINT: a suite started in the
    background of a shell inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt; the child gets the default back, as a terminal's would have."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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


def require(tool: str, package: str) -> str:
    """The path of a system tool the test needs; a missing one fails with the install command."""
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: apt-get install {package}")
    return path


QUADLET_PLACES = ("/usr/libexec/podman/quadlet", "/usr/local/lib/inferfleet/quadlet")


def quadlet_service(folder: Path, unit: str, content: str, *, user: bool) -> str:
    """The service unit Podman's Quadlet generator makes of one ``.container`` file
    (``-dryrun`` in ``folder``/quadlet); fails on a key it does not know."""
    units = folder / "quadlet"
    units.mkdir()
    (units / unit).write_text(content)
    result = subprocess.run(
        [quadlet_generator(), *(["-user"] if user else []), "-dryrun"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "QUADLET_UNIT_DIRS": str(units)},
    )
    problems = [line for line in result.stderr.splitlines() if "Loading source unit" not in line]
    assert result.returncode == 0 and not problems, result.stderr
    return result.stdout


def quadlet_generator() -> str:
    """Quadlet's generator (podman >= 4.4): ``$INFERFLEET_QUADLET``, then the usual places;
    the test skips, saying how to get one, where there is none (see tests/render/conftest.py)."""
    for place in (os.environ.get("INFERFLEET_QUADLET", ""), *QUADLET_PLACES):
        if place and os.access(place, os.X_OK):
            return place
    pytest.skip(
        "no Quadlet generator here (podman >= 4.4's /usr/libexec/podman/quadlet; Debian 12 "
        "ships 4.3): see tests/render/conftest.py for how to get Debian 13's"
    )
