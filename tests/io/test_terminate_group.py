"""``process.terminate`` stops the whole group a server leads, not only its leader (L-43).

vLLM's API server exits on SIGTERM before its EngineCore worker does; a
worker left behind spins at 100% CPU. Here a real leader (its own session)
starts a real child in its group, and the leader exits at once on SIGTERM.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from inferfleet.io import process

LEADER = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the leader leaves at once
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
while True:
    time.sleep(0.1)
"""
# The child takes ``linger`` seconds to stop on SIGTERM (or ignores it: None).
CHILD = """
import os, signal, sys, time
linger = {linger}
def stop(*_):
    if linger is None:
        return
    time.sleep(linger)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))  # ready: its handler is set
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    time.sleep(0.1)
"""


def _start(tmp_path: Path, linger: float | None) -> tuple[subprocess.Popen[bytes], int]:
    marker = tmp_path / "child.pid"
    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER, CHILD.format(linger=linger), str(marker)],
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "the leader did not start its child"
        time.sleep(0.05)
    child = int(marker.read_text())
    assert os.getpgid(child) == leader.pid
    return leader, child


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize(
    ("linger", "outcome"),
    [(1.0, "terminated"), (None, "killed")],
    ids=["child-stops-late", "child-ignores-sigterm"],
)
def test_terminate_returns_when_the_whole_group_is_gone(
    tmp_path: Path, linger: float | None, outcome: str
) -> None:
    leader, child = _start(tmp_path, linger)
    try:
        assert process.terminate(psutil.Process(leader.pid), grace=3.0) == outcome
        leader.wait(5)
        assert _gone(child), "a member of the server's group outlived its stop"
    finally:
        for pid in (child, leader.pid):
            if not _gone(pid):
                os.kill(pid, 9)
        leader.wait(5)


def test_an_own_child_that_exits_between_poll_and_status_is_reaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a loaded machine hits: the server exits after the wait polled it and
    before its status was read. ``terminate`` must reap it, not leave a zombie behind
    in a long-lived caller (the in-process restarts of ``up`` and ``tune``)."""
    proc = process.spawn_detached(
        [sys.executable, "-c", "import time; time.sleep(60)"], log_path=tmp_path / "log"
    )
    popen = process._reapers[proc.pid]
    polled = popen.poll

    def late_poll() -> int | None:
        # The real poll, then the exit lands: the status read next sees a zombie.
        code = polled()
        if code is None and proc.is_running():
            os.kill(proc.pid, 9)
            deadline = time.monotonic() + 5
            while proc.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
                time.sleep(0.01)
        return code

    monkeypatch.setattr(popen, "poll", late_poll)
    try:
        assert process.terminate(proc, grace=5) == "terminated"
        assert not psutil.pid_exists(proc.pid)
    finally:
        if psutil.pid_exists(proc.pid):
            os.kill(proc.pid, 9)
            popen.wait(5)
