"""A start killed between spawning its server and recording it (the process backend's intent).

The real interruption is driven end to end in tests/deploy/test_deploy_chaos.py;
here the state it leaves (a server running, its intent file, no record) is made
with the backend itself, and the intent's edges are checked: only a process
carrying the token is stopped, a damaged intent stops nothing and is dropped.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import no_process_on, server_script

from inferfleet.backends.process import START_TOKEN, STARTING, ProcessBackend

pytestmark = pytest.mark.slow


def interrupted_start(backend: ProcessBackend, port: int) -> int:
    """What a start killed before its record leaves: its intent, and a server carrying
    the intent's token that no record names."""
    token = "ab" * 16
    folder = backend.state_dir / STARTING
    folder.mkdir(parents=True)
    intent = {"service": "svc", "token": token, "since": time.time()}
    (folder / "svc.json").write_text(json.dumps(intent))
    server = subprocess.Popen(
        server_script("health_server.py") + [str(port)],
        env={**os.environ, START_TOKEN: token},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while no_process_on(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    return server.pid


def test_the_next_stop_stops_the_server_of_an_interrupted_start(tmp_path: Path, port: int) -> None:
    backend = ProcessBackend(tmp_path / "state")
    pid = interrupted_start(backend, port)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        result = backend.stop("svc")
        assert (result.outcome, result.pid, result.detail) == (
            "terminated",
            pid,
            "started, never recorded",
        )
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
        assert bystander.poll() is None  # no token, never signalled (L-43)
        assert not (backend.state_dir / STARTING / "svc.json").exists()
    finally:
        bystander.kill()
        bystander.wait(10)
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


@pytest.mark.parametrize("content", ["{", "[]", '{"service": "svc", "token": "x", "since": 1}'])
def test_a_damaged_intent_stops_nothing_and_is_dropped(
    tmp_path: Path, port: int, content: str
) -> None:
    backend = ProcessBackend(tmp_path / "state")
    pid = interrupted_start(backend, port)
    try:
        (backend.state_dir / STARTING / "svc.json").write_text(content)
        assert backend.reclaim("svc") == []
        assert psutil.Process(pid).is_running()
        assert not (backend.state_dir / STARTING / "svc.json").exists()
    finally:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
