"""Pid identity (io/pids.py): a pid plus its create time, against real processes (L-43)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from inferfleet.io import pids


def test_the_same_process_is_recognised_within_the_slack() -> None:
    me = psutil.Process()
    found = pids.same_process(os.getpid(), me.create_time() + pids.CREATE_TIME_SLACK / 2)
    assert found is not None and found.pid == os.getpid()
    assert pids.own_create_time() == me.create_time()


def test_a_reused_pid_is_another_process() -> None:
    # The recorded process started long before the one that now has its pid.
    assert pids.same_process(os.getpid(), psutil.Process().create_time() - 500) is None


def test_gone_and_zombie_processes_are_not_running() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(child.pid).create_time()
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        assert pids.same_process(child.pid, started) is None  # exited, not yet reaped
    finally:
        child.wait(10)
    assert pids.same_process(child.pid, started) is None
    assert pids.create_time(child.pid) is None and pids.uptime(child.pid) is None


def test_uptime_of_a_running_process() -> None:
    started = psutil.Process().create_time()
    assert pids.uptime(os.getpid(), now=started + 12.34) == 12.3
