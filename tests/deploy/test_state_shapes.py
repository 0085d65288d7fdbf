"""Crash-safe, shape-checked state, against real files and processes.

A record, marker or lock record of the wrong shape (valid JSON like ``[]``,
``{"pid": "x"}``, missing keys) is a clear FleetError naming the file and the
fix, never a TypeError or KeyError; the damaged file is left as it was (it
is evidence); ``status`` shows the row's problem; a writer killed at any
instant leaves the old state or the new one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from inferfleet.backends.process import ProcessBackend
from inferfleet.backends.records import RecordStore, ServiceRecord
from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.deploy.errors import LockHeldError
from inferfleet.deploy.inputs import ServiceInputs
from inferfleet.deploy.lock import HostLock, ServiceLock
from inferfleet.deploy.markers import Marker, MarkerError, MarkerStore
from inferfleet.errors import BackendError, FleetError

GOOD_RECORD = {
    "service": "chat",
    "host": "local",
    "pid": 4242,
    "create_time": 1.5,
    "argv": ["llama-server"],
    "bind": "127.0.0.1",
    "port": 8080,
    "log": "/tmp/chat.log",
    "started_at": 2.0,
    "spec_hash": "abc",
}

WRONG_SHAPES = [
    pytest.param("[]", "Input should be an object", id="a list"),
    pytest.param('"chat"', "Input should be an object", id="a string"),
    pytest.param("null", "Input should be an object", id="null"),
    pytest.param('{"pid": "x"}', "pid: Input should be a valid integer", id="pid as text"),
    pytest.param("{}", "service: Field required", id="missing keys"),
    pytest.param("{not json", "not valid JSON", id="not JSON"),
    pytest.param("", "not valid JSON", id="empty (torn by a crash of an old writer)"),
    pytest.param(
        json.dumps({**GOOD_RECORD, "argv": "llama-server --port 1"}),
        "argv: Input should be a valid array",
        id="argv as one string",
    ),
    pytest.param(
        json.dumps({**GOOD_RECORD, "pid": 0}), "pid 0 is not a process id", id="pid 0 (every pid)"
    ),
    pytest.param(json.dumps({**GOOD_RECORD, "pid": -1}), "pid -1 is not a process id", id="pid -1"),
    pytest.param(json.dumps({**GOOD_RECORD, "port": 70000}), "not a TCP port", id="port"),
    pytest.param(json.dumps({**GOOD_RECORD, "pid": 1.5}), "pid: Input should be", id="pid float"),
]


@pytest.mark.parametrize(("text", "problem"), WRONG_SHAPES)
def test_a_record_of_the_wrong_shape_is_a_clear_error_and_stays_as_it_was(
    tmp_path: Path, text: str, problem: str
) -> None:
    backend = ProcessBackend(tmp_path)
    path = backend.records.path("chat")
    path.parent.mkdir(parents=True)
    path.write_text(text)
    for attempt in (lambda: backend.records.read("chat"), lambda: backend.stop("chat")):
        with pytest.raises(BackendError) as caught:
            attempt()
        assert caught.value.where == str(path)
        assert f"service record {path} is damaged" in caught.value.message
        assert problem in caught.value.message
        assert "stop it by pid" in caught.value.hint and f"delete {path}" in caught.value.hint
    assert path.read_text() == text  # nothing lost: the evidence is kept


def test_a_good_record_reads_back_typed(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    record = ServiceRecord(**GOOD_RECORD)  # type: ignore[arg-type]
    store.write(record)
    assert store.read("chat") == record
    # Written by another version with a field we do not know: still read.
    store.path("chat").write_text(json.dumps({**GOOD_RECORD, "future": 1}))
    assert store.read("chat") == record


def _marker() -> Marker:
    return Marker(
        service="chat",
        host="h1",
        revision="a" * 40,
        inputs=ServiceInputs({"service": "abc"}, {}),
        backend="process",
        bind="127.0.0.1",
        port=8080,
        health_path="/health",
        applied_at=1.0,
        by="ops@laptop",
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[]", "Input should be an object"),
        ('{"service": "chat"}', "host: Field required"),
        (json.dumps({**_marker().to_json(), "inputs": []}), "inputs: Input should be an object"),
        (json.dumps({**_marker().to_json(), "history": "abc"}), "history: Input should be"),
        (json.dumps({**_marker().to_json(), "port": "8080"}), "port: Input should be"),
    ],
)
def test_a_marker_of_the_wrong_shape_is_a_clear_error(
    tmp_path: Path, text: str, problem: str
) -> None:
    store = MarkerStore(tmp_path)
    store.folder.mkdir()
    store.path("chat").write_text(text)
    for attempt in (lambda: store.read("chat"), store.all, lambda: store.write(_marker())):
        with pytest.raises(MarkerError) as caught:
            attempt()
        assert f"revision marker {store.path('chat')} is damaged" in caught.value.message
        assert problem in caught.value.message
        assert "delete it" in caught.value.hint
    assert store.path("chat").read_text() == text


def test_a_marker_in_a_hosts_report_of_the_wrong_shape_is_a_clear_error() -> None:
    for doc in ({"service": "chat"}, {**_marker().to_json(), "inputs": "x"}):
        with pytest.raises(MarkerError, match="unexpected shape"):
            Marker.from_json(doc)


@pytest.mark.parametrize("text", ["[]", '{"pid": "x"}', "{", '{"pid": 0, "user": 1}'])
def test_a_damaged_lock_record_only_loses_the_holders_description(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "inferfleet-deploy.lock"
    lock = HostLock(path, "h1")
    lock.acquire("apply of HEAD")
    try:
        lock.record_path.write_text(text)
        assert HostLock(path, "h1").holder() is None
        with pytest.raises(LockHeldError, match="host h1 is locked by another process"):
            HostLock(path, "h1").acquire("second")
    finally:
        lock.release()


def test_a_service_lock_waits_for_its_holder_and_says_whom(tmp_path: Path) -> None:
    code = (
        "import sys, time; from pathlib import Path;"
        "from inferfleet.deploy.lock import ServiceLock;"
        f"lock = ServiceLock(Path({str(tmp_path)!r}), 'chat'); lock.acquire('up of chat');"
        "print('held', flush=True); time.sleep(float(sys.argv[1]))"
    )
    child = subprocess.Popen([sys.executable, "-c", code, "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        told: list[str] = []
        with pytest.raises(LockHeldError, match=r"service chat is locked by up of chat .*waited"):
            ServiceLock(tmp_path, "chat").acquire("down of chat", wait=0.3, on_wait=told.append)
        assert len(told) == 1 and f"pid {child.pid}" in told[0]
        started = time.monotonic()
        with ServiceLock(tmp_path, "chat") as lock:
            lock.acquire("down of chat", wait=30, on_wait=told.append)
            assert time.monotonic() - started < 10  # got it once the holder ended
            assert child.wait(10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)


WRITER = """
import sys
from pathlib import Path
from inferfleet.backends.records import RecordStore, ServiceRecord
store = RecordStore(Path(sys.argv[1]))
base = {fields}
n = 0
print("writing", flush=True)
while True:
    n += 1
    store.write(ServiceRecord(**{{**base, "pid": n, "argv": ["x" * (n % 5000)]}}))
"""


def test_a_writer_killed_at_any_instant_leaves_the_old_record_or_the_new(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    store.write(ServiceRecord(**{**GOOD_RECORD, "pid": 1}))  # type: ignore[arg-type]
    script = WRITER.format(fields=repr(GOOD_RECORD))
    for delay in (0.05, 0.11, 0.2, 0.27, 0.35):
        child = subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "writing"
            time.sleep(delay)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        record = store.read("chat")  # never a torn file: old or new, both whole
        assert record is not None and record.pid >= 1
        assert record.argv == ["x" * (record.pid % 5000)] or record.pid == 1
    leftovers = [p.name for p in store.folder.iterdir() if p.name != "chat.json"]
    assert all(name.startswith(".") for name in leftovers)  # only temp files of killed writers


def test_status_shows_a_damaged_records_problem_in_its_row(tmp_path: Path, cli, port: int) -> None:
    data = yaml.safe_load(embedded_example().read_text())
    data["services"]["gemma"]["port"] = port
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    record = Path(os.environ["INFERFLEET_STATE_DIR"]) / "services" / "gemma.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"pid": "x"}')
    result = cli("status", "--file", str(fleet), "--json")
    assert "Traceback" not in result.stderr
    row = json.loads(result.stdout)["services"][0]
    assert row["state"] == "unknown"
    assert "service record" in row["detail"] and "is damaged" in row["detail"]
    assert "pid: Input should be a valid integer" in row["detail"]
    assert record.read_text() == '{"pid": "x"}'
    assert isinstance(BackendError("x"), FleetError)
