"""Pid identity: a pid plus its process's create time names one process.

A pid alone is not an identity: once its process ends the kernel hands the
number to the next process that starts. Whatever inferfleet records about a
process (a service record, the deploy lock's holder) keeps the create time
too, and is matched here, the one place that decides "still the same
process" (L-43: a stale record must never get an unrelated process signalled).
"""

from __future__ import annotations

import time

import psutil

# Linux reports create times in clock ticks (10 ms) added to the boot time,
# which is itself recomputed from the wall clock; a clock step by NTP moves it
# a little. A reused pid would need the kernel's pid counter to wrap around
# within this window, which no real workload does.
CREATE_TIME_SLACK = 1.0


def same_process(pid: int, create_time: float) -> psutil.Process | None:
    """The running process ``pid`` if it was created at ``create_time``, else None.

    A zombie (exited, not yet reaped) is not running: it holds no port and
    answers nothing, so it is None as well.
    """
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - create_time) > CREATE_TIME_SLACK:
            return None  # the pid was reused by an unrelated process
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None
    return proc


def create_time(pid: int) -> float | None:
    """When ``pid`` was created (seconds since the epoch), or None if it is gone."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def own_create_time() -> float:
    """This process's create time, to record beside our own pid."""
    return psutil.Process().create_time()


def uptime(pid: int, *, now: float | None = None) -> float | None:
    """Seconds since ``pid`` started, rounded to 0.1 s, or None if it is gone."""
    started = create_time(pid)
    if started is None:
        return None
    return round((time.time() if now is None else now) - started, 1)
