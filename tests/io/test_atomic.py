"""Atomic writes: a writer killed at any moment leaves the old file or the new one.

The writers under test are the real ones (the service record store and the
revision marker store), run in a child process that rewrites one file in a
loop and is killed with SIGKILL at random moments. After every kill the file
must parse and be the last write the child reported or the one it was doing;
the only temp file allowed is the killed writer's own in-flight temp, and the
next writer's first successful write sweeps it (io/files.py).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inferfleet.backends.records import RecordStore
from inferfleet.deploy.markers import MarkerStore
from inferfleet.io.files import (
    STALE_TEMP_AGE,
    atomic_write,
    atomic_writer,
    is_temp_of,
    staged_directory,
    sweep_stale_temps,
    write_if_changed,
)

KILLS = 30  # per writer, at least
# A marker write spends most of its time reading the previous marker, not inside its temp
# (about a tenth here, less on a loaded machine): kill more until some kills did land in a
# write, so the torn-write moments are exercised on every machine.
MAX_KILLS = 300
IN_FLIGHT_WANTED = 3

# Each generation is a few hundred KiB so a write spans many syscalls and an fsync.
_RECORD_WRITER = """
import os, sys
from pathlib import Path
from inferfleet.backends.records import RecordStore, ServiceRecord
store = RecordStore(Path(sys.argv[1]))
progress = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
gen = int(sys.argv[3])
while True:
    gen += 1
    store.write(ServiceRecord(
        service="chat", host="h1", pid=gen, create_time=float(gen), bind="127.0.0.1",
        port=8080, log="/tmp/chat.log", started_at=float(gen), spec_hash=str(gen),
        argv=[f"--arg-{gen}-{i:05d}-" + "x" * 80 for i in range(3000)],
    ))
    os.write(progress, f"{gen}\\n".encode())
"""

_MARKER_WRITER = """
import os, sys
from pathlib import Path
from inferfleet.deploy.inputs import ServiceInputs
from inferfleet.deploy.markers import Marker, MarkerStore
store = MarkerStore(Path(sys.argv[1]))
progress = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
gen = int(sys.argv[3])
files = {f"models/m{i}.manifest": "f" * 64 for i in range(3000)}
while True:
    gen += 1
    store.write(Marker(
        service="chat", host="h1", revision=f"{gen:040d}",
        inputs=ServiceInputs({"service": str(gen)}, files), backend="process",
        bind="127.0.0.1", port=8080, health_path="/health", applied_at=float(gen), by="t@h",
    ))
    os.write(progress, f"{gen}\\n".encode())
"""


def _last_generation(progress: Path) -> int:
    lines = progress.read_text().splitlines() if progress.exists() else []
    return int(lines[-1]) if lines else 0


def _generation(kind: str, state: Path) -> int:
    if kind == "record":
        record = RecordStore(state).read("chat")
        assert record is not None
        assert record.argv[0].startswith(f"--arg-{record.pid}-")  # all of one generation
        return record.pid
    marker = MarkerStore(state).read("chat")
    assert marker is not None
    gen = int(marker.revision)
    assert marker.inputs.sections == {"service": str(gen)}
    if gen > 1 and marker.history:
        assert int(marker.history[0]) == gen - 1  # history is of the same write
    return gen


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["record", "marker"])
def test_a_writer_killed_at_random_moments_leaves_old_or_new_never_torn(
    tmp_path: Path, kind: str
) -> None:
    state = tmp_path / "state"
    target = state / ("services" if kind == "record" else "markers") / "chat.json"
    progress = tmp_path / "progress"
    script = _RECORD_WRITER if kind == "record" else _MARKER_WRITER
    argv = [sys.executable, "-c", script, str(state), str(progress)]
    rng = random.Random(11)
    in_flight_temps = kills = 0
    while kills < KILLS or (in_flight_temps < IN_FLIGHT_WANTED and kills < MAX_KILLS):
        kills += 1
        start = _last_generation(progress)
        child = subprocess.Popen([*argv, str(start)])
        try:
            deadline = time.monotonic() + 30
            # Its first write has swept the temps of the writers killed before it.
            while _last_generation(progress) <= start:
                assert child.poll() is None, "the writer died by itself"
                assert time.monotonic() < deadline, "the writer wrote nothing in 30 s"
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.05))
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        reported = _last_generation(progress)
        assert _generation(kind, state) in (reported, reported + 1)
        others = [p for p in target.parent.iterdir() if p != target]
        for leftover in others:
            assert is_temp_of(target, leftover), leftover
            assert f".{child.pid}." in leftover.name, "a temp of an earlier writer was left"
        in_flight_temps += len(others)
    # Some kills landed inside a write: the test did exercise torn-write moments.
    assert in_flight_temps > 0, f"no kill of {kills} landed inside a write"
    # The store's readers never see a temp as a service.
    if kind == "record":
        assert RecordStore(state).names() == ["chat"]
    else:
        assert list(MarkerStore(state).all()) == ["chat"]
    # One more successful write clears the last killed writer's temp.
    start = _last_generation(progress)
    child = subprocess.Popen([*argv, str(start)])
    try:
        while _last_generation(progress) <= start:
            assert child.poll() is None
            time.sleep(0.002)
        os.kill(child.pid, signal.SIGSTOP)  # between writes or inside one: its temp is live
        survivors = [p for p in target.parent.iterdir() if p != target]
        assert all(f".{child.pid}." in p.name for p in survivors)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)


def test_stale_temps_are_swept_live_ones_kept(tmp_path: Path) -> None:
    target = tmp_path / "chat.json"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        of_dead = tmp_path / f".chat.json.{dead.pid}.abc123.tmp"
        of_live = tmp_path / f".chat.json.{sleeper.pid}.def456.tmp"
        old_live = tmp_path / f".chat.json.{sleeper.pid}.old789.tmp"
        unrelated = tmp_path / f".other.json.{dead.pid}.abc123.tmp"
        for path in (of_dead, of_live, old_live, unrelated):
            path.write_text("partial")
        long_ago = time.time() - STALE_TEMP_AGE - 5
        os.utime(old_live, (long_ago, long_ago))  # a pid may have been reused since
        atomic_write(target, '{"ok": true}\n')
        assert json.loads(target.read_text()) == {"ok": True}
        assert not of_dead.exists() and not old_live.exists()
        assert of_live.exists(), "a live writer's temp must be left to it"
        assert unrelated.exists(), "only temps of the file written are swept"
        assert sweep_stale_temps(target) == []
    finally:
        sleeper.kill()
        sleeper.wait(10)
    assert sweep_stale_temps(target) == [of_live]


def test_an_error_mid_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "big.bin"
    atomic_write(target, b"old")
    with pytest.raises(RuntimeError), atomic_writer(target) as out:
        out.write(b"new, half")
        raise RuntimeError("interrupted")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.bin"]


def test_modes_new_files_0644_existing_kept_explicit_applied(tmp_path: Path) -> None:
    target = tmp_path / "marker.json"
    atomic_write(target, "1")
    assert target.stat().st_mode & 0o777 == 0o644
    target.chmod(0o640)
    atomic_write(target, "2")
    assert target.stat().st_mode & 0o777 == 0o640
    atomic_write(target, "3", mode=0o600)
    assert target.stat().st_mode & 0o777 == 0o600


def test_write_if_changed_writes_only_changes_but_always_fixes_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "settings.yaml"
    assert write_if_changed(target, "key: 1\n", mode=0o600) is True
    inode = target.stat().st_ino
    target.chmod(0o644)
    assert write_if_changed(target, "key: 1\n", mode=0o600) is False
    assert target.stat().st_ino == inode  # not rewritten
    assert target.stat().st_mode & 0o777 == 0o600
    assert write_if_changed(target, "key: 2\n", mode=0o600) is True
    assert target.read_text() == "key: 2\n"


def test_a_staged_directory_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    dest = tmp_path / "report"
    with pytest.raises(KeyError), staged_directory(dest) as staging:
        (staging / "summary.json").write_text("{}")
        raise KeyError("the plot failed")
    assert not dest.exists() and list(tmp_path.iterdir()) == []
    dest.mkdir()  # an empty folder may be given as the target
    with staged_directory(dest) as staging:
        (staging / "summary.json").write_text("{}")
    assert [p.name for p in dest.iterdir()] == ["summary.json"]
    assert dest.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in tmp_path.iterdir()] == ["report"]
