"""Process backend and health gate against real processes on real ports.

L-33 (health only counts from the service's own process), L-34 (503 while
loading is not failure), L-35 (a held port is refused and its holder named),
L-43 (stop by recorded pid only; SIGKILL after the grace period).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import no_process_on, server_script

from inferfleet.backends.health import wait_healthy
from inferfleet.backends.process import ProcessBackend, alive
from inferfleet.backends.records import ServiceRecord
from inferfleet.errors import HealthError, PortInUseError

pytestmark = pytest.mark.slow


def template(name: str, argv: list[str], port: int) -> ServiceRecord:
    return ServiceRecord(
        service=name,
        host="local",
        pid=0,
        create_time=0.0,
        argv=argv,
        bind="127.0.0.1",
        port=port,
        log="",
        started_at=0.0,
        spec_hash="h",
    )


def wait_listening(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not no_process_on(port):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def test_loading_503_then_200_is_waited_for(tmp_path: Path, port: int) -> None:
    backend = ProcessBackend(tmp_path / "state")
    argv = [*server_script("health_server.py"), str(port), "--loading", "1.5"]
    record, proc = backend.start(template("svc", argv, port), env={})
    states: list[str] = []
    try:
        result = wait_healthy(
            proc,
            service="svc",
            bind="127.0.0.1",
            port=port,
            path="/health",
            timeout=30,
            log_path=Path(record.log),
            on_state=lambda s, _t: states.append(s),
        )
        assert "loading" in states and states[-1] == "ok"  # L-34: 503 meant loading
        assert 1.4 <= result.seconds < 10
        assert backend.records.read("svc") == record
        assert alive(record) is not None
    finally:
        stopped = backend.stop("svc")
    assert stopped.outcome == "terminated"
    assert not psutil.pid_exists(proc.pid) or proc.status() == psutil.STATUS_ZOMBIE
    assert no_process_on(port)
    assert backend.records.read("svc") is None


def test_process_dying_while_loading_fails_the_gate_with_its_log(tmp_path: Path, port: int) -> None:
    backend = ProcessBackend(tmp_path / "state")
    argv = [*server_script("health_server.py"), str(port), "--loading", "60", "--die-after", "0.8"]
    record, proc = backend.start(template("dies", argv, port), env={})
    try:
        started = time.monotonic()
        with pytest.raises(HealthError) as info:
            wait_healthy(
                proc,
                service="dies",
                bind="127.0.0.1",
                port=port,
                path="/health",
                timeout=60,
                log_path=Path(record.log),
            )
        # It failed as soon as the process died, not at the 60 s timeout.
        assert time.monotonic() - started < 15
        text = info.value.render()
        assert "exited (status 3) before it became healthy" in text
        assert "tensor type 103 unknown" in text  # the log's last lines are shown
    finally:
        backend.stop("dies")


def test_timeout_while_loading_says_raise_the_timeout(tmp_path: Path, port: int) -> None:
    backend = ProcessBackend(tmp_path / "state")
    argv = [*server_script("health_server.py"), str(port), "--loading", "60"]
    record, proc = backend.start(template("slow", argv, port), env={})
    try:
        with pytest.raises(HealthError) as info:
            wait_healthy(
                proc,
                service="slow",
                bind="127.0.0.1",
                port=port,
                path="/health",
                timeout=1.5,
                log_path=Path(record.log),
            )
        assert "still loading after 2 s" in info.value.message
        assert "health.timeout" in info.value.hint
        assert alive(record) is not None  # L-34: the gate never kills a loading server
    finally:
        backend.stop("slow")


def test_port_held_by_another_pid_is_refused_and_named(tmp_path: Path, port: int, reap) -> None:
    holder = psutil.Popen([*server_script("hold_port.py"), str(port)], stdout=subprocess.DEVNULL)
    reap.append(holder)
    wait_listening(port)
    backend = ProcessBackend(tmp_path / "state")
    argv = [*server_script("health_server.py"), str(port)]
    with pytest.raises(PortInUseError) as info:
        backend.start(template("svc", argv, port), env={})
    assert f"pid {holder.pid}" in info.value.message and "hold_port.py" in info.value.message
    assert backend.records.read("svc") is None  # nothing was started or recorded
    assert holder.is_running()  # and the holder was left alone


def test_stale_answer_from_another_process_is_not_health(tmp_path: Path, port: int, reap) -> None:
    """L-33: a stale server answers /health on the port; our process is not the one."""
    stale = psutil.Popen([*server_script("health_server.py"), str(port)], stdout=subprocess.DEVNULL)
    reap.append(stale)
    wait_listening(port)
    # Our service: a process that never binds the port (it fails to start its listener).
    ours = psutil.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    reap.append(ours)
    with pytest.raises(HealthError) as info:
        wait_healthy(ours, service="svc", bind="127.0.0.1", port=port, path="/health", timeout=1.0)
    assert f"belongs to pid {stale.pid}" in info.value.message
    assert "L-33" in info.value.hint


def test_stale_record_whose_pid_was_reused_is_never_signalled(
    tmp_path: Path, port: int, reap
) -> None:
    unrelated = psutil.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    reap.append(unrelated)
    backend = ProcessBackend(tmp_path / "state")
    # A record that names the unrelated pid but an older create time: pid reuse.
    record = ServiceRecord(
        service="old",
        host="local",
        pid=unrelated.pid,
        create_time=unrelated.create_time() - 500,
        argv=["llama-server"],
        bind="127.0.0.1",
        port=port,
        log=str(tmp_path / "x.log"),
        started_at=0.0,
        spec_hash="h",
    )
    backend.records.write(record)
    assert alive(record) is None
    result = backend.stop("old")
    assert result.outcome == "stale"
    assert "now belongs to another process" in result.detail
    assert unrelated.is_running() and unrelated.status() != psutil.STATUS_ZOMBIE
    assert backend.records.read("old") is None  # the stale record is cleared


def test_stop_escalates_to_sigkill_for_a_process_ignoring_sigterm(
    tmp_path: Path, port: int
) -> None:
    backend = ProcessBackend(tmp_path / "state")
    argv = [*server_script("health_server.py"), str(port), "--ignore-term"]
    record, proc = backend.start(template("stubborn", argv, port), env={})
    wait_healthy(proc, service="stubborn", bind="127.0.0.1", port=port, path="/health", timeout=15)
    started = time.monotonic()
    result = backend.stop("stubborn", grace=1.0)
    assert result.outcome == "killed"
    assert 0.9 <= time.monotonic() - started < 10
    assert no_process_on(port)
    assert "ignoring SIGTERM" in Path(record.log).read_text()


def test_process_record_is_written_atomically_with_identity(tmp_path: Path, port: int) -> None:
    backend = ProcessBackend(tmp_path / "state")
    argv = [*server_script("health_server.py"), str(port)]
    record, proc = backend.start(template("rec", argv, port), env={})
    try:
        assert record.pid == proc.pid
        assert abs(record.create_time - proc.create_time()) < 0.01
        assert record.argv == argv and record.port == port
        files = sorted(p.name for p in (tmp_path / "state" / "services").iterdir())
        assert files == ["rec.json"]  # no temp file left behind
        # Detached: its own session, so a Ctrl-C in our terminal does not reach it.
        assert proc.pid == __import__("os").getsid(proc.pid)
    finally:
        backend.stop("rec")
