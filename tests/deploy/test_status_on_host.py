"""Health judged where the service lives, on real test hosts over real ssh.

A service bound to a test host's loopback cannot be reached from here, and
this machine's own 127.0.0.1 on the same port is a stranger's (the test
starts one): status reads such a service from its host's facts (``apply
--facts`` over ssh, one round trip per host, hosts in parallel) and says
``unknown`` when the host does not answer, never healthy (L-33). A host that
hangs, prints garbage or prints a huge document is bounded in time and size
and leaves the other host's rows as they are. And the plan reads facts: a
server killed behind a current marker is started again by the next deploy.
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

import httpx
import pytest
from deploy_hosts import Lab
from deploy_repo import FleetRepo
from helpers import FIXTURES, free_port

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]
ENTRY = Path(__file__).resolve().parent / "inferfleet_entry.py"


def deploy(cli: Any, repo: FleetRepo, *args: str) -> dict[str, Any]:
    result = cli("deploy", *args, "-y", "--file", str(repo.fleet_file), "--json")
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def status(cli: Any, repo: FleetRepo) -> tuple[int, dict[str, Any], dict[str, dict[str, Any]]]:
    result = cli("status", "--json", "--file", str(repo.fleet_file))
    assert result.code in {0, 1}, result.stderr
    doc = json.loads(result.stdout)
    return result.code, doc, {s["service"]: s for s in doc["services"]}


def on_loopback(port: int, host: str = "h1") -> dict[str, Any]:
    """A service bound to its host's loopback (closed by default, L-58)."""
    return {"host": host, "bind": "127.0.0.1", "port": port}


def closed(repo: FleetRepo) -> FleetRepo:
    """The fleet with no exposure for its loopback services (the fixture opens them)."""
    for service in repo.data["services"].values():
        if service["bind"] == "127.0.0.1":
            service.pop("exposure", None)
    repo.commit("loopback services: closed")
    return repo


@pytest.fixture
def stranger(tmp_path: Path) -> Iterator[int]:
    """A process on this machine's loopback that answers /health 200 on a free port."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(FIXTURES / "servers" / "health_server.py"), str(port)],
        stdin=subprocess.DEVNULL,
        stdout=(tmp_path / "stranger.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).is_success:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        yield port
    finally:
        server.kill()
        server.wait(10)


def test_l33_a_remote_loopback_service_is_judged_on_its_host_never_by_a_local_stranger(
    cli, fleet, lab: Lab, stranger: int
) -> None:
    repo = closed(fleet({"chat": on_loopback(stranger)}))
    deploy(cli, repo, "h1")

    code, doc, rows = status(cli, repo)
    chat = rows["chat"]
    # Healthy because h1 says its own process answers there (its pid), not the stranger.
    assert (chat["state"], code, doc["ok"]) == ("healthy", 0, True), chat
    record = repo.record("h1", "chat")
    assert record is not None and chat["pid"] == record["pid"]
    assert any("judged on host h1 over ssh" in note for note in chat["notes"])

    os.kill(record["pid"], signal.SIGKILL)  # the server dies; the stranger here still answers
    code, doc, rows = status(cli, repo)
    assert rows["chat"]["state"] in {"down", "stale"}, rows["chat"]
    assert (code, doc["ok"]) == (1, False)

    lab.hosts["h1"].link(False)  # h1 unreachable: nothing can be known about chat
    try:
        started = time.monotonic()
        code, doc, rows = status(cli, repo)
        assert time.monotonic() - started < 60
    finally:
        lab.hosts["h1"].link(True)
    chat = rows["chat"]
    assert chat["state"] == "unknown" and chat["detail"].startswith("host unreachable: "), chat
    assert (code, doc["ok"]) == (1, False)


BAD_HOSTS = {
    # hangs: never answers (bounded by the per-host timeout)
    "hang": "sleep 600",
    # garbage: control characters and half a document
    "garbage": "printf '\\033[31mgarbage\\007 {\"host\": \\n'",
    # huge: far more than any facts document (bounded by size, not read whole)
    "huge": "head -c 40000000 /dev/zero | tr '\\0' 'x'",
}


@pytest.mark.parametrize("mode", sorted(BAD_HOSTS))
def test_a_host_that_hangs_or_answers_garbage_is_unknown_and_the_other_host_unaffected(
    cli, fleet, lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    # Each host runs its own `inferfleet` (its venv): h1 the real one, h2 a broken one.
    monkeypatch.delenv("INFERFLEET_REMOTE_COMMAND")
    venvs = {}
    for name, body in (("h1", f'exec {sys.executable} {ENTRY} "$@"'), ("h2", BAD_HOSTS[mode])):
        venv = tmp_path / f"venv-{name}"
        (venv / "bin").mkdir(parents=True)
        program = venv / "bin" / "inferfleet"
        program.write_text(f"#!/bin/sh\n{body}\n")
        program.chmod(0o755)
        venvs[name] = str(venv)
    repo = closed(fleet({"chat": on_loopback(free_port()), "far": on_loopback(free_port(), "h2")}))
    for name, venv in venvs.items():
        repo.data["hosts"][name]["venv"] = venv
    repo.commit("each host's own inferfleet")
    deploy(cli, repo, "h1")

    started = time.monotonic()
    code, doc, rows = status(cli, repo)
    took = time.monotonic() - started
    assert took < 45, f"status took {took:.1f} s"
    assert rows["chat"]["state"] == "healthy", rows["chat"]  # h1 unaffected
    far = rows["far"]
    assert far["state"] == "unknown" and far["detail"].startswith("host unreachable: "), far
    assert all(c.isprintable() for c in far["detail"]), far["detail"]
    expected = {
        "hang": "did not finish within",
        "garbage": "did not answer with its facts",
        "huge": "printed more than",
    }[mode]
    assert expected in far["detail"], far["detail"]
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert hosts["h1"]["reach"] == "ssh" and hosts["h2"]["reach"] == "unreachable"
    assert (code, doc["ok"]) == (1, False)


def test_a_killed_server_behind_a_current_marker_is_planned_and_deployed_again(
    cli, fleet, lab: Lab
) -> None:
    repo = fleet({"a": {}})
    deploy(cli, repo, "h1")
    record = repo.record("h1", "a")
    assert record is not None
    os.kill(record["pid"], signal.SIGKILL)  # a crash: record and marker stay behind

    plan = cli("plan", "h1", "--file", str(repo.fleet_file), "--json")
    [item] = json.loads(plan.stdout)["hosts"][0]["items"]
    assert item["action"] == "deploy", item
    assert (
        item["reasons"][0].startswith("not running") and "marker is current" in item["reasons"][0]
    )

    doc = deploy(cli, repo, "h1")
    result = doc["hosts"][0]["result"]
    assert result["selected"] == ["a"] and result["failed"] is None, result
    again = repo.record("h1", "a")
    assert again is not None and again["pid"] != record["pid"]
    assert httpx.get(f"http://{lab.hosts['h1'].address}:8080/health", timeout=5).is_success
    # Serving again: kept (and the no-op memo the deploy left answers it).
    assert deploy(cli, repo, "h1")["hosts"][0]["result"]["selected"] == []


def test_l33_probe_reaches_a_remote_loopback_service_through_its_host_not_a_local_stranger(
    cli, fleet, lab: Lab, stranger: int
) -> None:
    repo = closed(fleet({"chat": on_loopback(stranger)}))
    deploy(cli, repo, "h1")
    result = cli("probe", "chat", "--json", "--file", str(repo.fleet_file))
    assert result.code in {0, 1}, result.stderr
    report = json.loads(result.stdout)
    checks = {c["id"]: c for c in report["checks"]}
    # The host's server answered (it lists the alias and its window); the stranger here
    # knows no /v1/models.
    assert checks["alias"]["status"] == "pass", checks["alias"]
    assert report["findings"]["n_ctx_slot"] == 512
    assert report["target"]["url"] != f"http://127.0.0.1:{stranger}"
    shown = cli("probe", "chat", "--file", str(repo.fleet_file))
    assert f"127.0.0.1:{stranger} on host h1, through ssh" in " ".join(shown.stderr.split())
