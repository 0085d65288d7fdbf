"""stop / start / restart / logs and holds for a process-backend service of this machine.

The fleet repository's only host is 127.0.0.1 (the local connector), the
runtime the fake llama-server of the deploy tests (a real process with a real
port and log), the state dir the test's own. Every verb runs through the real
entry point.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from deploy_repo import FleetRepo

# The local fleet of the apply tests (host here = 127.0.0.1, fake runtime, tiny model).
from test_apply_local import local_repo  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow


def health(port: int) -> int | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code
    except httpx.HTTPError:
        return None


def pid_of(repo: FleetRepo) -> int:
    record = repo.record("here", "a")
    assert record is not None
    return int(record["pid"])


def test_stop_hold_survives_apply_up_and_restart_until_start_lifts_it(
    cli: Any,
    local_repo: FleetRepo,  # noqa: F811
    port: int,
    _isolated_state: Path,
) -> None:
    fleet = str(local_repo.fleet_file)
    assert cli("apply", "--file", fleet).code == 0
    first = pid_of(local_repo)
    assert health(port) == 200

    stopped = cli("stop", "a", "--file", fleet, "--hold", "disk replacement")
    assert stopped.code == 0, stopped.stderr
    assert "a on here: stopped" in stopped.stdout
    assert "held: disk replacement, since" in stopped.stdout
    assert not psutil.pid_exists(first) or psutil.Process(first).status() == "zombie"
    assert health(port) is None
    assert local_repo.marker("here", "a") is None  # a marker says what runs (L-41)
    hold = json.loads((_isolated_state / "holds" / "a.json").read_text())
    assert hold["reason"] == "disk replacement" and "@" in hold["by"]

    # apply, plan and up leave it down and say why.
    applied = cli("apply", "--file", fleet)
    assert applied.code == 0, applied.stderr
    assert "a: held: disk replacement, since" in applied.stdout
    assert health(port) is None
    plan = json.loads(cli("plan", "--file", fleet, "--json").stdout)
    [item] = plan["hosts"][0]["items"]
    assert item["action"] == "held" and item["reasons"][0].startswith("held: disk replacement")
    up = cli("up", fleet, "--json")
    assert up.code == 0, up.stderr
    [row] = json.loads(up.stdout)["services"]
    assert row["action"] == "held" and row["health"] == "held"
    assert health(port) is None
    # status: held is a choice, not a problem.
    status = cli("status", "--file", fleet, "--json")
    [svc] = json.loads(status.stdout)["services"]
    assert svc["state"] == "held" and "disk replacement" in svc["detail"]
    assert status.code == 0, status.stdout
    # A deploy asked for it by name refuses rather than silently starting it.
    named = cli("apply", "--file", fleet, "--service", "a")
    assert named.code == 2 and "inferfleet start a" in named.stderr
    refused = cli("restart", "a", "--file", fleet)
    assert refused.code == 2 and "is held: disk replacement" in refused.stderr
    assert health(port) is None

    started = cli("start", "a", "--file", fleet)
    assert started.code == 0, started.stderr
    assert "hold lifted" in started.stderr
    assert health(port) == 200
    assert not (_isolated_state / "holds" / "a.json").exists()
    marker = local_repo.marker("here", "a")
    assert marker is not None and marker["revision"] == local_repo.head()
    again = cli("apply", "--file", fleet)
    assert again.code == 0 and "nothing to apply" in again.stdout  # the memo forgot the hold

    before = pid_of(local_repo)
    restarted = cli("restart", "a", "--file", fleet)
    assert restarted.code == 0, restarted.stderr
    assert "restarted" in restarted.stdout
    assert pid_of(local_repo) != before and health(port) == 200

    # A plain stop (no hold): the next apply brings it back.
    assert cli("stop", "a", "--file", fleet).code == 0
    assert health(port) is None
    back = cli("apply", "--file", fleet)
    assert back.code == 0, back.stderr
    assert health(port) == 200


@pytest.mark.parametrize("reason", ["", "x" * 201, "red\x1b[31m", "two\nlines"])
def test_a_bad_hold_reason_is_refused_before_anything_stops(
    cli: Any,
    local_repo: FleetRepo,  # noqa: F811
    port: int,
    _isolated_state: Path,
    reason: str,
) -> None:
    fleet = str(local_repo.fleet_file)
    assert cli("apply", "--file", fleet).code == 0
    pid = pid_of(local_repo)
    done = cli("stop", "a", "--file", fleet, "--hold", reason)
    assert done.code == 2, done.stdout + done.stderr
    assert "one printable line" in done.stderr and "Traceback" not in done.stderr
    assert pid_of(local_repo) == pid and health(port) == 200
    assert local_repo.marker("here", "a") is not None
    assert not (_isolated_state / "holds").exists()


def test_stop_of_an_unknown_service_is_a_usage_error(
    cli: Any,
    local_repo: FleetRepo,  # noqa: F811
) -> None:
    done = cli("stop", "nope", "--file", str(local_repo.fleet_file))
    assert done.code == 2 and "no service named 'nope'" in done.stderr


def test_logs_tail_and_follow_show_bad_bytes_as_replacement_characters(
    cli: Any,
    local_repo: FleetRepo,  # noqa: F811
    _isolated_state: Path,
) -> None:
    fleet = str(local_repo.fleet_file)
    assert cli("apply", "--file", fleet).code == 0
    [log] = (_isolated_state / "logs").glob("a*.log")
    with log.open("ab") as handle:
        handle.write(b"\nbad bytes \xff\xfe here\n")
    shown = cli("logs", "a", "--file", fleet, "-n", "1")
    assert shown.code == 0, shown.stderr
    assert shown.stdout.strip() == "bad bytes \ufffd\ufffd here"

    env = {**os.environ, "COLUMNS": "200"}
    follower = subprocess.Popen(
        [sys.executable, "-m", "inferfleet", "logs", "a", "--file", fleet, "-n", "0", "-F"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert follower.stdout is not None
        # Written until the follower, once at the log's end, shows a line (it starts in ~1 s).
        deadline = time.monotonic() + 60
        ready: list[Any] = []
        while not ready and time.monotonic() < deadline:
            with log.open("ab") as handle:
                handle.write(b"after \x80 the start\n")
            ready, _, _ = select.select([follower.stdout], [], [], 1.0)
        assert ready, "logs -F printed nothing within 60 s"
        assert follower.stdout.readline().decode() == "after \ufffd the start\n"
    finally:
        os.kill(follower.pid, signal.SIGTERM)
        follower.wait(10)
