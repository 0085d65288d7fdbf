"""Markers (L-41), the host lock, and git's refusals, against real files and processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deploy_repo import FleetRepo, git

from inferfleet.deploy.errors import DirtyTreeError, GitError, LockHeldError
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.inputs import ServiceInputs
from inferfleet.deploy.lock import HostLock
from inferfleet.deploy.markers import Marker, MarkerError, MarkerStore


def marker(revision: str, service: str = "chat") -> Marker:
    return Marker(
        service=service,
        host="h1",
        revision=revision,
        inputs=ServiceInputs({"service": "abc"}, {"models/x.manifest": "f00"}),
        backend="systemd",
        bind="0.0.0.0",
        port=8080,
        health_path="/health",
        applied_at=1.0,
        by="ops@laptop",
        unit="inferfleet-chat",
        installed=["/etc/systemd/system/inferfleet-chat.service"],
    )


def test_markers_round_trip_keep_history_and_write_atomically(tmp_path: Path) -> None:
    store = MarkerStore(tmp_path / "state")
    assert store.read("chat") is None and store.all() == {}
    store.write(marker("a" * 40))
    store.write(marker("b" * 40))
    store.write(marker("b" * 40))  # the same revision again does not grow the history
    store.write(marker("c" * 40))
    got = store.read("chat")
    assert got is not None
    assert got.revision == "c" * 40
    assert got.history == ["b" * 40, "a" * 40]
    assert got.inputs == marker("x").inputs
    assert sorted(p.name for p in (tmp_path / "state" / "markers").iterdir()) == ["chat.json"]
    store.remove("chat")
    assert store.read("chat") is None


def test_an_unreadable_marker_says_what_to_do(tmp_path: Path) -> None:
    store = MarkerStore(tmp_path)
    store.folder.mkdir()
    store.path("chat").write_text("{not json")
    with pytest.raises(MarkerError, match="chat.json is damaged: not valid JSON") as caught:
        store.read("chat")
    assert "delete it" in caught.value.hint


def test_a_second_lock_fails_at_once_and_names_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "git" / "inferfleet-deploy.lock"
    first = HostLock(path, "h1")
    first.acquire("apply of HEAD after a pull")
    try:
        started = time.monotonic()
        with pytest.raises(LockHeldError) as caught:
            HostLock(path, "h1").acquire("apply of HEAD")
        assert time.monotonic() - started < 1.0
        text = caught.value.render()
        assert "host h1 is locked by apply of HEAD after a pull" in text
        assert "pid" in text and "since" in text and "s ago" in text
        holder = HostLock(path, "h1").holder()
        assert holder is not None and holder.what == "apply of HEAD after a pull"
    finally:
        first.release()
    assert HostLock(path, "h1").holder() is None
    with HostLock(path, "h1") as again:
        again.acquire("next")


def test_a_killed_holder_never_leaves_a_stale_lock(tmp_path: Path) -> None:
    path = tmp_path / "inferfleet-deploy.lock"
    code = (
        "import time; from pathlib import Path; from inferfleet.deploy.lock import HostLock;"
        f"lock = HostLock(Path({str(path)!r}), 'h1'); lock.acquire('held');"
        "print('held', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        with pytest.raises(LockHeldError, match=f"pid {child.pid}"):
            HostLock(path, "h1").acquire("second")
    finally:
        child.kill()
        child.wait(10)
    assert HostLock(path, "h1").holder() is None  # the record is left, its holder is gone
    lock = HostLock(path, "h1")
    lock.acquire("after the crash")
    assert json.loads(lock.record_path.read_text())["what"] == "after the crash"
    assert path.read_text() == ""  # never renamed over: its inode holds the lock
    lock.release()
    assert not lock.record_path.exists()


def test_git_refuses_dirty_trees_and_diverged_checkouts(tmp_path: Path) -> None:
    repo = FleetRepo.create(tmp_path / "fleet", {"version": 1, "hosts": {}}, hosts=["h1"])
    checkout = Repo.containing(repo.checkouts["h1"])
    checkout.require_clean("the checkout")
    (repo.checkouts["h1"] / "fleet.yaml").write_text("edited on the host\n")
    with pytest.raises(DirtyTreeError, match="has uncommitted changes \\(fleet.yaml\\)") as dirty:
        checkout.require_clean("the checkout")
    assert "only committed revisions are deployed" in dirty.value.hint
    git(repo.checkouts["h1"], "commit", "-qam", "a local change on the host")
    repo.commit("a change upstream", {"README.md": "changed\n"})
    git(repo.operator, "push", "-q")
    with pytest.raises(GitError, match="has diverged from origin/main \\(1 local commit") as err:
        checkout.pull_ff_only()
    assert "reset --hard origin/main" in err.value.hint
    git(repo.checkouts["h1"], "reset", "-q", "--hard", "origin/main")
    checkout.pull_ff_only()
    assert checkout.head() == repo.head()


def test_export_writes_a_revision_as_plain_files(tmp_path: Path) -> None:
    repo = FleetRepo.create(tmp_path / "fleet", {"version": 1, "hosts": {}}, hosts=[])
    first = repo.head()
    repo.commit("second", {"models/a.manifest": "1 sha256:00 a.gguf\n"})
    out = Repo.containing(repo.fleet_file).export(first, tmp_path / "rev")
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "fleet.yaml"]
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())
    with pytest.raises(GitError, match="is not inside a git repository"):
        Repo.containing(tmp_path)
    git(repo.operator, "checkout", "-q", "-b", "topic")
    with pytest.raises(GitError, match="branch 'topic' .* has no upstream") as caught:
        Repo.containing(repo.fleet_file).push()
    assert caught.value.hint == "set one once: git push -u origin topic"
