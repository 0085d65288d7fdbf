"""A host's no-op deploy answered from its memo (deploy/noop.py).

The deploy's form of apply (``--pull --expect REV --events``) on a host whose
services are all at their inputs answers from the memo its last apply left,
before Typer or pydantic load; anything the plan depends on that changed
(the fleet file, a declared file, a file under a watched folder, a marker),
a damaged memo, a held lock or another form of apply takes the full apply.
Every answer from the memo must equal the full apply's, event for event.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deploy_repo import FleetRepo, local_fleet, stop_recorded
from helpers.git import git
from helpers.imports import PROBE

from inferfleet.deploy import noop
from inferfleet.deploy.lock import LOCK_NAME, HostLock

pytestmark = pytest.mark.slow

HEAVY = ("pydantic", "typer", "inferfleet.fleetfile.fleet", "inferfleet.fleetfile.loader")


@pytest.fixture
def repo(
    tmp_path: Path, port: int, fake_runtime: Path, tiny_model: dict[str, Any], _isolated_state: Path
) -> Iterator[FleetRepo]:
    runtime = {"kind": "llama.cpp", "binary": str(fake_runtime)}
    data = local_fleet(runtime, tiny_model, port, paths=["conf/"])
    repo = FleetRepo.create(tmp_path / "fleet", data, hosts=["here"])
    repo.states = {"here": _isolated_state}
    yield repo
    stop_recorded(_isolated_state)


class Run:
    def __init__(self, events: list[dict[str, Any]], modules: set[str], code: int) -> None:
        self.events = events
        self.modules = modules
        self.code = code

    @property
    def from_memo(self) -> bool:
        return not any(m == p or m.startswith(p + ".") for m in self.modules for p in HEAVY)

    @property
    def result(self) -> dict[str, Any]:
        return next(e["result"] for e in self.events if e["event"] == "result")


def host_apply(repo: FleetRepo, *args: str, expect: str | None = None, **env: str) -> Run:
    """The deployer's apply on host "here", in a fresh interpreter, as ssh runs it."""
    fleet_file = repo.checkouts["here"] / "fleet.yaml"
    argv = args or (
        "apply", "--file", str(fleet_file), "--host", "here", "--pull",
        "--expect", expect or repo.head(), "--events",
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        cwd=repo.checkouts["here"],
    )
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout.strip().splitlines()[-1])
    events = [json.loads(ln) for ln in done.stderr.splitlines() if ln.startswith("{")]
    return Run(events, set(last["modules"]), last["code"] or 0)


def memo_file(repo: FleetRepo) -> Path:
    return repo.checkouts["here"] / ".git" / noop.MEMO_NAME


def test_a_second_noop_apply_is_answered_from_the_memo_as_the_full_apply_would(
    repo: FleetRepo,
) -> None:
    first = host_apply(repo)
    assert first.code == 0 and first.result["selected"] == ["a"]
    assert not first.from_memo
    assert memo_file(repo).is_file()

    fast = host_apply(repo)
    assert fast.code == 0 and fast.from_memo, "pydantic or Typer was imported"
    full = host_apply(repo, INFERFLEET_NO_MEMO="1")
    assert not full.from_memo
    assert fast.events == full.events
    assert fast.result["selected"] == [] and fast.result["ok"] is True
    assert [i["action"] for i in fast.result["plan"]] == ["keep"]


def test_a_commit_that_touches_no_input_of_the_host_is_still_answered(repo: FleetRepo) -> None:
    host_apply(repo)
    head = repo.commit("docs", {"README.md": "# our fleet\n\nmore words\n"})
    git(repo.operator, "push", "-q")
    fast = host_apply(repo, expect=head)
    assert fast.from_memo
    assert fast.result["revision"] == head
    assert repo.checkout_head("here") == head  # the pull happened
    assert fast.events == host_apply(repo, INFERFLEET_NO_MEMO="1", expect=head).events


@pytest.mark.parametrize("change", ["fleet", "watched-folder", "marker"])
def test_a_changed_input_takes_the_full_apply(repo: FleetRepo, change: str) -> None:
    host_apply(repo)
    head = repo.head()
    if change == "fleet":
        repo.data["services"]["a"]["ctx_per_slot"] = 1024
        head = repo.commit("bigger window")
    elif change == "watched-folder":
        head = repo.commit("a new file under conf/", {"conf/extra.txt": "x\n"})
    else:
        (repo.states["here"] / "markers" / "a.json").unlink()
    git(repo.operator, "push", "-q")
    run = host_apply(repo, expect=head)
    assert not run.from_memo
    assert run.result["selected"] == ["a"], run.events
    # ... and that apply leaves a memo of its own, answered next time.
    assert host_apply(repo, expect=head).from_memo


def test_a_killed_server_with_a_current_marker_is_started_again_never_answered_as_fine(
    repo: FleetRepo,
) -> None:
    first = host_apply(repo)
    assert first.result["selected"] == ["a"] and memo_file(repo).is_file()
    record = repo.record("here", "a")
    assert record is not None
    os.kill(record["pid"], signal.SIGKILL)  # a crash: its record and marker stay behind
    wait_gone(record["pid"])

    run = host_apply(repo)
    assert not run.from_memo, "the memo claimed a dead service is fine"
    assert run.result["selected"] == ["a"], run.events
    [item] = run.result["plan"]
    assert item["action"] == "deploy"
    assert item["reasons"][0].startswith(f"not running: recorded pid {record['pid']}"), item
    assert "(its marker is current)" in item["reasons"][0]
    again = repo.record("here", "a")
    assert again is not None and again["pid"] != record["pid"]
    assert [d["outcome"] for d in run.result["done"]] == ["deployed"]
    # Serving again, it is kept, and the memo it left answers the next deploy.
    assert host_apply(repo).from_memo


def wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while noop.started(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert noop.started(pid) is None, f"pid {pid} still runs"


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[]",
        b'{"version": 1}',
        b"{" + b" " * (noop.MAX_MEMO_BYTES + 1) + b"}",
        "other-host",
        "wrong-types",
    ],
    ids=["garbage", "list", "missing-keys", "huge", "other-host", "wrong-types"],
)
def test_a_damaged_or_foreign_memo_is_never_trusted(repo: FleetRepo, content: Any) -> None:
    host_apply(repo)
    path = memo_file(repo)
    good = json.loads(path.read_text())
    if content == "other-host":
        content = json.dumps({**good, "host": "elsewhere"}).encode()
    elif content == "wrong-types":
        content = json.dumps({**good, "markers": [["a.json", "1", 2, 3]]}).encode()
    path.write_bytes(content)
    run = host_apply(repo)
    assert run.code == 0 and not run.from_memo
    assert run.result["selected"] == []
    assert json.loads(path.read_text()) == good  # the full apply wrote it again


def test_a_held_lock_is_reported_by_the_full_apply(repo: FleetRepo) -> None:
    host_apply(repo)
    lock = HostLock(repo.checkouts["here"] / ".git" / LOCK_NAME, "here")
    lock.acquire("a test holding the lock")
    try:
        fleet_file = repo.checkouts["here"] / "fleet.yaml"
        done = subprocess.run(
            [sys.executable, "-m", "inferfleet", "apply", "--file", str(fleet_file),
             "--host", "here", "--pull", "--expect", repo.head(), "--events"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        lock.release()
    assert done.returncode == 1
    error = json.loads(done.stdout.strip().splitlines()[-1])
    assert error["event"] == "error" and "a test holding the lock" in error["message"]


def test_a_checkout_behind_the_pushed_revision_is_reported_by_the_full_apply(
    repo: FleetRepo,
) -> None:
    host_apply(repo)
    fleet_file = repo.checkouts["here"] / "fleet.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "inferfleet", "apply", "--file", str(fleet_file),
         "--host", "here", "--pull", "--expect", "0" * 40, "--events"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    error = json.loads(done.stdout.strip().splitlines()[-1])
    assert error["event"] == "error" and "not at the pushed" in error["message"]


@pytest.mark.parametrize(
    ("argv", "form"),
    [
        (["--file", "f.yaml", "--host", "h", "--pull", "--expect", "abc", "--events"], True),
        (["--file=f.yaml", "--host=h", "--events", "--expect=abc", "--pull"], True),
        (["--host", "h", "--pull", "--expect", "abc", "--events"], True),
        (["--host", "h", "--pull", "--expect", "abc", "--events", "--offline"], True),  # deploy's
        (["--host", "h", "--pull", "--expect", "abc"], False),  # not the deployer's
        (["--host", "h", "--expect", "abc", "--events"], False),  # no pull
        (["--host", "h", "--pull", "--events"], False),  # nothing expected
        (["--host", "h", "--pull", "--expect", "abc", "--events", "--service", "a"], False),
        (["--host", "h", "--pull", "--expect", "abc", "--events", "--dry-run"], False),
        (["--host", "h", "--pull", "--expect", "abc", "--events", "--drain"], False),
        (["--host", "h", "--host", "g", "--pull", "--expect", "abc", "--events"], False),
        (["--host", "h", "--pull", "--pull", "--expect", "abc", "--events"], False),
        (["--host", "", "--pull", "--expect", "abc", "--events"], False),
        (["--host", "h", "--pull", "--expect"], False),
    ],
)
def test_only_the_deployers_form_of_apply_may_be_answered(argv: list[str], form: bool) -> None:
    assert (noop.deploy_form(argv) is not None) is form
