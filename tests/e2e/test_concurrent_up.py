"""Two `inferfleet up` runs at once: one server and a correct record.

Real processes, the real llama-server on the embedded example: the second
run waits for the first's lock (and says so), then finds the server running
with the same spec and leaves it alone. A `down` racing an `up` is waited
for the same way: it never stops a half-started server and leaves the
record behind, and never leaves an unrecorded one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import no_process_on

from inferfleet.backends.records import RecordStore

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _inferfleet(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "inferfleet", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )


def _finish(procs: list[subprocess.Popen[str]], timeout: float = 600) -> list[tuple[int, str, str]]:
    done = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            done.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    return done


def _servers_on(port: int) -> list[int]:
    return sorted(
        {
            c.pid
            for c in psutil.net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid
        }
    )


def test_two_concurrent_ups_end_with_one_server_and_its_record(
    local_fleet: Path, port: int, servers_of: list[int]
) -> None:
    first = _inferfleet("up", str(local_fleet), "--json")
    time.sleep(0.3)
    second = _inferfleet("up", str(local_fleet))
    (code1, out1, err1), (code2, out2, err2) = _finish([first, second])
    assert code1 == 0, err1
    assert code2 == 0, err2
    started = json.loads(out1)["services"][0]
    servers_of.append(started["pid"])

    # Exactly one server, the one the record names, and it is the process on the port.
    state = Path(os.environ["INFERFLEET_STATE_DIR"])
    record = RecordStore(state).read("gemma")
    assert record is not None
    assert _servers_on(port) == [record.pid]
    assert psutil.Process(record.pid).create_time() == pytest.approx(record.create_time, abs=0.01)
    assert Path(psutil.Process(record.pid).cmdline()[0]).name == "llama-server"
    # Whichever got the lock first started it; the other waited, said so, and kept it.
    assert started["action"] in {"started", "unchanged"} and started["pid"] == record.pid
    if started["action"] == "started":
        assert "unchanged" in out2
        assert "waiting for the lock" in err2 + out2
    else:
        assert "started" in out2

    # A down racing a fresh up: afterwards either nothing runs and no record is
    # left, or one recorded server runs; never an orphan.
    stop = _inferfleet("down", "--file", str(local_fleet), "--json")
    time.sleep(0.2)
    again = _inferfleet("up", str(local_fleet), "--json")
    (code_down, _out, err_down), (code_up, out_up, err_up) = _finish([stop, again])
    assert code_down == 0, err_down
    assert code_up == 0, err_up
    servers_of.append(json.loads(out_up)["services"][0]["pid"])
    record = RecordStore(state).read("gemma")
    running = _servers_on(port)
    assert running == ([] if record is None else [record.pid])

    final = _finish([_inferfleet("down", "--file", str(local_fleet), "--json")])
    assert final[0][0] == 0, final[0][2]
    assert no_process_on(port)
    assert RecordStore(state).read("gemma") is None
