"""Real processes: kill -9 at random points and resume; Ctrl-C; the token and /proc (L-06)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import ctrl_c_reaches_it
from hub_repos import MODEL_SIZE, small_repo, split_repo
from hub_tokens import GOOD_TOKEN, FleetMaker
from hubserver import HubServer, Repo, git_blob_id

from inferfleet.artifacts.manifest import parse_manifest
from inferfleet.artifacts.record import RECORD_NAME
from inferfleet.artifacts.verify import verify_files
from inferfleet.hub.download import CHUNK

pytestmark = pytest.mark.slow
INFERFLEET = [sys.executable, "-m", "inferfleet"]  # the real entry point, as a child
Cli = Callable[..., Any]


def write_manifest(hub: HubServer, repo: Repo, make_fleet: FleetMaker, cli: Cli) -> Path:
    hub.add(repo)
    fleet = make_fleet(repo.repo_id)
    result = cli(
        "models", "manifest", repo.repo_id,
        "--endpoint", hub.endpoint, "-o", str(fleet.parent / "m.manifest"),
    )  # fmt: skip
    assert result.code == 0, result.stderr
    return fleet


def start_fetch(
    fleet: Path, hub: HubServer, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    argv = [*INFERFLEET, "models", "fetch", "m", "-f", str(fleet)]
    argv += ["--endpoint", hub.endpoint, "--retries", "3", *extra]
    log = (fleet.parent / "child.log").open("ab")
    return subprocess.Popen(
        argv,
        env=env or dict(os.environ),
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        preexec_fn=ctrl_c_reaches_it,
    )


def on_disk(folder: Path) -> int:
    """Bytes of the model present in any form: partials and finished files."""
    if not folder.exists():
        return 0
    return sum(
        p.stat().st_size for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")
    )


def _port(address: str) -> int:
    return int(address.split(":")[1], 16)


def kernel_queued(ports: set[int]) -> int:
    """Bytes sent by the test Hub that the client has not read: both sides' socket queues.

    After a kill -9 the kernel drops them; they were never the fetcher's, so
    they do not count against its unflushed tail.
    """
    queued = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as handle:
            for line in list(handle)[1:]:
                fields = line.split()
                local, remote, state = _port(fields[1]), _port(fields[2]), fields[3]
                tx, rx = (int(v, 16) for v in fields[4].split(":"))
                if state != "01":  # ESTABLISHED
                    continue
                if local in ports:
                    queued += tx  # the server's unsent or unacknowledged bytes
                elif remote in ports:
                    queued += rx  # received by the client's kernel, not read
    return queued


def check_record(folder: Path, declared: dict[str, str], seen: dict[str, list[int]]) -> None:
    """Every file the record vouches for has exactly the declared bytes."""
    path = folder / RECORD_NAME
    if not path.exists():
        return
    for name, entry in json.loads(path.read_text()).items():
        if seen.get(name) == entry["stat"]:
            continue
        data = (folder / name).read_bytes()
        if len(declared[name]) == 64:
            actual = hashlib.sha256(data).hexdigest()
        else:
            actual = git_blob_id(data)
        assert actual == declared[name], f"{name} is marked verified with wrong bytes"
        seen[name] = entry["stat"]


def test_kill_9_at_random_points_then_resume(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    repo = split_repo()
    fleet = write_manifest(hub, repo, make_fleet, cli)
    declared = {e.path: e.value for e in parse_manifest(fleet.parent / "m.manifest").entries}
    folder = fleet.parent / "models" / "m"
    total = sum(item.blob.size for item in repo.files.values())
    assert total > MODEL_SIZE
    hub.faults.rate = 40e6  # per connection: kills land mid-file, in flight stays small
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    points = sorted(rng.sample(range(total // 50, total - total // 50), 12))
    kills = 0
    in_kernel = 0
    ports = {int(hub.endpoint.rsplit(":", 1)[1]), int(hub.cdn.rsplit(":", 1)[1])}
    seen: dict[str, list[int]] = {}
    for point in points:
        child = start_fetch(fleet, hub, "--jobs", "3")
        try:
            while on_disk(folder) < point and child.poll() is None:
                time.sleep(0.002)
            if child.poll() is None:
                # Freeze the fetcher, let the Hub finish its slice, read what the
                # kernel holds, then kill -9 at exactly that state.
                os.kill(child.pid, signal.SIGSTOP)
                hub.flowing.clear()
                time.sleep(0.05)
                in_kernel += kernel_queued(ports)
                os.kill(child.pid, signal.SIGKILL)
                kills += 1
        finally:
            child.kill()
            child.wait()
            hub.flowing.set()
        check_record(folder, declared, seen)
    assert kills >= 10, f"seed {seed}: only {kills} kills landed"
    hub.faults.rate = None
    done = start_fetch(fleet, hub, "--jobs", "3")
    assert done.wait(120) == 0, (fleet.parent / "child.log").read_text()[-3000:]
    check_record(folder, declared, seen)
    results = verify_files(folder, parse_manifest(fleet.parent / "m.manifest").entries, full=True)
    assert all(r.ok for r in results), results
    network = sum(hub.sent.values()) - total  # what the wire carried twice
    again = network - in_kernel  # what the fetcher had read and lost
    budget = total // 100 + kills * 3 * CHUNK  # 1% plus the tail of each of 3 files
    print(
        f"seed {seed}: {kills} kills; fetched again {again:,} bytes (budget {budget:,}); "
        f"the wire carried {network:,} twice, {in_kernel:,} of them in socket buffers"
    )
    assert again <= budget, f"seed {seed}: {again:,} bytes fetched twice > {budget:,}"
    # The CDN never saw `bytes=0-` and every resume asked for a later byte (L-03).
    assert all(r.range != "bytes=0-" for r in hub.requests("cdn"))


def test_kills_with_wrong_bytes_never_mark_a_wrong_file_verified(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    repo = small_repo(extra=3)
    fleet = write_manifest(hub, repo, make_fleet, cli)
    declared = {e.path: e.value for e in parse_manifest(fleet.parent / "m.manifest").entries}
    folder = fleet.parent / "models" / "m"
    hub.faults.rate = 6e6
    hub.faults.corrupt = 6
    seen: dict[str, list[int]] = {}
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    for _ in range(6):
        child = start_fetch(fleet, hub, "--jobs", "2")
        try:
            time.sleep(rng.uniform(0.5, 1.5))
        finally:
            child.kill()
            child.wait()
        check_record(folder, declared, seen)
    hub.faults.rate = None
    hub.faults.corrupt = 0
    done = start_fetch(fleet, hub)
    assert done.wait(60) == 0, (fleet.parent / "child.log").read_text()[-3000:]
    check_record(folder, declared, seen)
    assert set(seen) == set(declared)


def test_the_token_is_on_no_command_line_while_a_fetch_runs_L06(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    repo = small_repo("test/private", private=True, extra=1)
    hub.add(repo)
    hub.faults.rate = 3e6  # about two seconds of fetching to watch
    fleet = make_fleet(repo.repo_id)
    env = {**os.environ, "HF_TOKEN": GOOD_TOKEN}
    manifest = subprocess.run(
        [*INFERFLEET, "models", "manifest", repo.repo_id,
         "--endpoint", hub.endpoint, "-o", str(fleet.parent / "m.manifest")],
        env=env, capture_output=True, check=False,
    )  # fmt: skip
    assert manifest.returncode == 0, manifest.stderr
    child = start_fetch(fleet, hub, env=env)
    needle = GOOD_TOKEN.encode()
    scans = 0
    saw_child = False
    try:
        while child.poll() is None:
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                assert needle not in cmdline, f"token on the command line of pid {entry.name}"
                saw_child = saw_child or (int(entry.name) == child.pid and b"fetch" in cmdline)
            scans += 1
            time.sleep(0.01)  # the Hub's threads share this process
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 0, (fleet.parent / "child.log").read_text()[-3000:]
    assert saw_child and scans >= 5
    # The token was used (the repo is private) and only the endpoint got it.
    assert all(r.auth == f"Bearer {GOOD_TOKEN}" for r in hub.requests("hub"))
    assert all(r.auth is None for r in hub.requests("cdn"))
    assert GOOD_TOKEN not in (fleet.parent / "child.log").read_text()


def test_ctrl_c_keeps_the_partial_and_the_next_run_resumes(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    repo = small_repo(extra=1)
    fleet = write_manifest(hub, repo, make_fleet, cli)
    folder = fleet.parent / "models" / "m"
    hub.faults.rate = 2e6
    child = start_fetch(fleet, hub, "--jobs", "1")
    try:
        while not list(folder.glob("*.partial")) or on_disk(folder) < (1 << 20):
            assert child.poll() is None
            time.sleep(0.01)
        child.send_signal(signal.SIGINT)
        assert child.wait(30) == 130
    finally:
        child.kill()
        child.wait()
    log = (fleet.parent / "child.log").read_text()
    assert "kept in partial files; run the same command again to resume" in log
    assert "Traceback" not in log
    kept = on_disk(folder)
    hub.faults.rate = None
    result = cli(
        "models", "fetch", "m", "-f", str(fleet), "--endpoint", hub.endpoint, "--jobs", "1"
    )
    assert result.code == 0, result.stderr
    assert "resuming at" in result.stderr
    total = sum(item.blob.size for item in repo.files.values())
    assert sum(hub.sent.values()) - total <= 2 * CHUNK
    assert kept > 0
