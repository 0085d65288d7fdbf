"""A wall-clock step never turns a running server into a stranger (L-43).

The kernel recomputes the boot time from the wall clock on every read, and
psutil adds it to each process's start: after an NTP step (a host without a
real-time clock, a VM resumed from a snapshot) every create time moves by the
step. Identity by that time judged a live server gone: ``stop`` dropped its
record and left it running, the next start found its port "held by another
process". The step is simulated where psutil reads the boot time (this
machine's clock is not ours to move); the server, its record and the stop
are real.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import psutil._pslinux as pslinux
import pytest
from helpers import no_process_on, server_script

from inferfleet.backends.health import wait_healthy
from inferfleet.backends.process import ProcessBackend, alive
from inferfleet.backends.records import ServiceRecord
from inferfleet.io import pids
from inferfleet.io.locks import FileLock

pytestmark = pytest.mark.slow

STEP = 90.0  # seconds the wall clock jumps forward


@pytest.fixture
def clock_step(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """Calling it steps the wall clock as psutil sees it: every create time moves."""
    booted = pslinux.boot_time

    def step() -> None:
        monkeypatch.setattr(pslinux, "boot_time", lambda: booted() + STEP)

    yield step


def template(name: str, argv: list[str], port: int) -> ServiceRecord:
    return ServiceRecord(
        service=name, host="local", pid=0, create_time=0.0, argv=argv, bind="127.0.0.1",
        port=port, log="", started_at=0.0, spec_hash="h",
    )  # fmt: skip


def test_a_server_stays_ours_across_a_clock_step(
    tmp_path: Path, port: int, clock_step: Callable[[], None]
) -> None:
    backend = ProcessBackend(tmp_path / "state")
    argv = [*server_script("health_server.py"), str(port)]
    record, proc = backend.start(template("chat", argv, port), env={})
    try:
        wait_healthy(proc, service="chat", bind="127.0.0.1", port=port, path="/health", timeout=15)
        assert record.born is not None and record.born.boot_id == pids.boot_id()
        written = json.loads(backend.records.path("chat").read_text())
        assert written["since_boot"] == record.since_boot > 0

        clock_step()
        assert abs(psutil.Process(proc.pid).create_time() - record.create_time - STEP) < 0.1
        found = alive(backend.records.read("chat"))  # type: ignore[arg-type]
        assert found is not None and found.pid == proc.pid
        # A record from before births were kept has only the moved time: judged gone.
        old = ServiceRecord(**{**record.__dict__, "since_boot": 0.0, "boot_id": ""})
        assert old.born is None and alive(old) is None

        result = backend.stop("chat")
        assert (result.outcome, result.pid) == ("terminated", proc.pid)
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
        assert no_process_on(port)
    finally:
        if proc.is_running():
            proc.kill()


def test_a_pid_of_another_boot_or_another_start_is_not_the_recorded_one() -> None:
    me = pids.own_birth()
    assert me is not None
    create = psutil.Process().create_time()
    assert pids.same_process(os.getpid(), create + 500, me) is not None  # the birth decides
    rebooted = pids.Birth(me.since_boot, "0" * 32)
    assert pids.same_process(os.getpid(), create, rebooted) is None
    reused = pids.Birth(me.since_boot - 0.5, me.boot_id)
    assert pids.same_process(os.getpid(), create, reused) is None


def test_the_deploy_lock_holder_stays_the_holder_across_a_clock_step(
    tmp_path: Path, clock_step: Callable[[], None]
) -> None:
    lock = FileLock(tmp_path / "host.lock", name="host h1")
    lock.acquire("deploy")
    try:
        clock_step()
        holder = lock.holder()
        assert holder is not None and holder.pid == os.getpid()
    finally:
        lock.release()
    assert lock.holder() is None
