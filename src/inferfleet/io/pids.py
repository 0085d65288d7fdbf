"""Pid identity: a pid plus when its process started names one process.

A pid alone is not an identity: once its process ends the kernel hands the
number to the next process that starts. Whatever inferfleet records about a
process (a service record, the deploy lock's holder) keeps its start too,
and is matched here, the one place that decides "still the same process"
(L-43: a stale record must never get an unrelated process signalled).

The start is kept twice. ``create_time`` is wall-clock seconds, for people
and for uptimes. The identity is the :class:`Birth`: the kernel's start in
clock ticks since boot, and the boot it happened in. psutil's public
``create_time`` adds a boot time the kernel recomputes from the wall clock on
every read, so an NTP step between recording a server and looking at it
again (a host without a real-time clock, a VM resumed from a snapshot)
moved it by the step, and a live server was judged gone: its record removed,
its port then "held by a stranger" (psutil #2541 describes the same). The
ticks since boot never move.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

# Linux reports create times in clock ticks (10 ms) added to the boot time,
# which is itself recomputed from the wall clock; a clock step by NTP moves it
# a little. A reused pid would need the kernel's pid counter to wrap around
# within this window, which no real workload does.
CREATE_TIME_SLACK = 1.0


# Two readings of one start in ticks agree exactly; this only absorbs float printing.
SINCE_BOOT_SLACK = 0.001


@dataclass(frozen=True)
class Birth:
    """When a process started, in a form no clock step can move."""

    since_boot: float  # seconds from boot to its start (the kernel's ticks)
    boot_id: str  # the boot it started in (a reboot reuses small pids and tick counts)

    @classmethod
    def recorded(cls, since_boot: float, boot: str) -> Birth | None:
        """A state file's two fields as a birth; None from a file written before births."""
        return cls(since_boot, boot) if boot else None


@functools.cache
def boot_id() -> str:
    """This boot's id (the kernel's random boot_id); "" where the kernel has none."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text()[:64].strip()
    except OSError:
        return ""


def since_boot(pid: int) -> float | None:
    """Seconds from boot to ``pid``'s start, from the kernel's ticks; None if it is gone.

    Read from ``/proc/PID/stat`` (its 22nd field) because psutil offers it only
    through a private call; the program name (field 2) may hold spaces and
    parentheses, so the fields are counted after its last ``)``.
    """
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()[:4096]
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 1 :].split()
    try:
        return int(fields[19]) / _clock_ticks()
    except (IndexError, ValueError):
        return None


@functools.cache
def _clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def birth(pid: int) -> Birth | None:
    """``pid``'s birth, to record beside it; None if it is gone."""
    started = since_boot(pid)
    return None if started is None else Birth(started, boot_id())


def same_process(pid: int, create_time: float, born: Birth | None = None) -> psutil.Process | None:
    """The running process ``pid`` if it is the one recorded, else None.

    ``born`` (when recorded) decides; without it (a record written before
    births were kept) the wall-clock ``create_time`` does, within a slack.
    A zombie (exited, not yet reaped) is not running: it holds no port and
    answers nothing, so it is None as well.
    """
    try:
        proc = psutil.Process(pid)
        if born is not None and born.boot_id:
            if born.boot_id != boot_id():
                return None  # recorded in an earlier boot: every process of it is gone
            started = since_boot(pid)
            if started is None or abs(started - born.since_boot) > SINCE_BOOT_SLACK:
                return None  # the pid was reused by an unrelated process
        elif abs(proc.create_time() - create_time) > CREATE_TIME_SLACK:
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


def own_birth() -> Birth | None:
    """This process's birth, to record beside our own pid."""
    return birth(os.getpid())


def uptime(pid: int, *, now: float | None = None) -> float | None:
    """Seconds since ``pid`` started, rounded to 0.1 s, or None if it is gone."""
    started = create_time(pid)
    if started is None:
        return None
    return round((time.time() if now is None else now) - started, 1)
