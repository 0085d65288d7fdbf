"""Deploy faults on real test hosts; after each one, a re-run converges.

A crash-looping service, an orphan answering /health on the port (never
green, L-33), a health timeout (L-34), the ssh connection dropped mid-apply,
an unreachable host, a failure in the middle of a drain (L-40), two deploys
at once, a dirty checkout and a diverged checkout on the host.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_hosts import Lab
from deploy_repo import FleetRepo, git
from helpers import FIXTURES

from inferfleet.deploy import rollout
from inferfleet.deploy.apply import lock_for
from inferfleet.deploy.gitrepo import Repo
from inferfleet.fleetfile.loader import load_fleet

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]
HERE = Path(__file__).resolve().parent


def deploy(cli: Any, repo: FleetRepo, *args: str) -> tuple[int, dict[str, Any], str]:
    result = cli("deploy", *args, "-y", "--file", str(repo.fleet_file), "--json")
    doc = json.loads(result.stdout) if result.stdout.strip() else {}
    return result.code, doc, result.stderr


def host_doc(doc: dict[str, Any], host: str) -> dict[str, Any]:
    return next(h for h in doc["hosts"] if h["host"] == host)


def healthy(lab: Lab, host: str, port: int = 8080) -> bool:
    try:
        return httpx.get(f"http://{lab.hosts[host].address}:{port}/health", timeout=3).is_success
    except httpx.TransportError:
        return False


def converged(cli: Any, repo: FleetRepo, host: str, services: list[str]) -> None:
    """Deploy again: it succeeds, and afterwards the plan has nothing left to do."""
    code, doc, err = deploy(cli, repo, host)
    assert code == 0, err
    assert host_doc(doc, host)["result"]["failed"] is None
    plan = json.loads(cli("plan", host, "--file", str(repo.fleet_file), "--json").stdout)
    items = {i["service"]: i["action"] for i in plan["hosts"][0]["items"]}
    assert items == {name: "keep" for name in services}
    for name in services:
        assert repo.marker(host, name) is not None


def test_a_crash_looping_service_fails_with_its_log_and_converges(cli, fleet, lab) -> None:
    repo = fleet({"a": {"extra_args": ["--x-loading", "30", "--x-die-after", "0.3"]}})
    code, doc, err = deploy(cli, repo, "h1")
    assert code == 1
    failed = host_doc(doc, "h1")["result"]["failed"]
    assert failed["service"] == "a" and "exited (status 3)" in failed["message"]
    assert "fatal: failed to load model" in failed["log_tail"]
    assert "fatal: failed to load model" in err  # the human report shows the log lines
    assert repo.marker("h1", "a") is None and repo.record("h1", "a") is None
    assert not healthy(lab, "h1")

    repo.data["services"]["a"]["extra_args"] = []
    repo.commit("a: fixed")
    converged(cli, repo, "h1", ["a"])
    assert healthy(lab, "h1")


def test_an_orphan_answering_health_on_the_port_is_never_green(
    cli, fleet, lab, tmp_path: Path
) -> None:
    repo = fleet({"a": {}})
    orphan = lab.hosts["h1"].spawn(
        [sys.executable, str(FIXTURES / "servers" / "health_server.py"), "8080",
         "--bind", lab.hosts["h1"].address],
        tmp_path / "orphan.log",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not healthy(lab, "h1") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert healthy(lab, "h1"), "the orphan should answer /health"
        code, doc, _err = deploy(cli, repo, "h1")
        assert code == 1
        failed = host_doc(doc, "h1")["result"]["failed"]
        assert failed["error"] == "PortInUseError"
        assert f"held by pid {orphan.pid}" in failed["message"]
        assert "L-33" in failed["hint"] and "never kills" in failed["hint"]
        assert repo.marker("h1", "a") is None  # green never, marker never (L-33, L-41)
        assert orphan.poll() is None  # and the stranger was not killed (L-43)
    finally:
        orphan.kill()
        orphan.wait(10)
    converged(cli, repo, "h1", ["a"])


def test_a_health_timeout_stops_the_server_and_says_raise_the_timeout(cli, fleet, lab) -> None:
    repo = fleet({"a": {"extra_args": ["--x-loading", "60"], "health": {"timeout": "1s"}}})
    code, doc, _err = deploy(cli, repo, "h1")
    assert code == 1
    failed = host_doc(doc, "h1")["result"]["failed"]
    assert "still loading after 1 s" in failed["message"] and "503" in failed["message"]
    assert "raise the service's health.timeout" in failed["hint"]
    assert repo.record("h1", "a") is None and not healthy(lab, "h1")  # stopped by its pid

    repo.data["services"]["a"]["extra_args"] = ["--x-loading", "0.5"]
    repo.data["services"]["a"]["health"] = {"timeout": "20s"}
    repo.commit("a: a timeout that fits the load")
    converged(cli, repo, "h1", ["a"])


def test_a_connection_dropped_mid_apply_converges_on_the_next_run(cli, fleet, lab) -> None:
    repo = fleet({"a": {"extra_args": ["--x-loading", "4"]}})
    side = rollout.Fleetside.of(load_fleet(repo.fleet_file))
    dropped: list[float] = []

    def on_event(host: str, event: dict[str, Any]) -> None:
        if event.get("event") == "health" and event.get("state") == "loading" and not dropped:
            lab.hosts[host].link(False)
            dropped.append(time.monotonic())

    try:
        [run] = rollout.deploy(side, ["h1"], on_event=on_event)
    finally:
        lab.hosts["h1"].link(True)
    assert dropped, "the apply never reached its health gate"
    assert not run.ok and run.error is not None
    assert "the ssh connection dropped" in run.error["message"]
    assert "converges" in run.error["hint"]
    # The apply on the host did not die with the connection: it finishes and releases the lock.
    lock = lock_for(Repo.containing(repo.checkouts["h1"]), "h1")
    deadline = time.monotonic() + 60
    while lock.holder() is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lock.holder() is None
    converged(cli, repo, "h1", ["a"])
    assert healthy(lab, "h1")


def test_an_unreachable_host_fails_alone_and_converges(cli, fleet, lab) -> None:
    repo = fleet({"a": {"host": "h1"}, "b": {"host": "h2"}})
    lab.hosts["h2"].link(False)
    try:
        code, doc, err = deploy(cli, repo, "h1", "h2")
    finally:
        lab.hosts["h2"].link(True)
    assert code == 1
    assert host_doc(doc, "h1")["ok"] and repo.marker("h1", "a") is not None
    error = host_doc(doc, "h2")["error"]
    assert "cannot reach the host over ssh" in error["message"]
    assert lab.hosts["h2"].address in error["where"]
    assert "h2" in err
    code, doc, err = deploy(cli, repo, "h1", "h2")
    assert code == 0, err
    assert host_doc(doc, "h1")["result"]["done"] == []
    assert [d["service"] for d in host_doc(doc, "h2")["result"]["done"]] == ["b"]


def test_a_failure_in_the_middle_of_a_drain_keeps_later_markers(cli, fleet, lab) -> None:
    repo = fleet({"a": {"port": 8080}, "b": {"port": 8081}, "c": {"port": 8082}})
    assert deploy(cli, repo, "h1")[0] == 0
    first = repo.head()
    c_pid = repo.record("h1", "c")["pid"]  # type: ignore[index]
    for name in ("a", "b", "c"):
        repo.data["services"][name]["env"] = {"SAMPLING_TEMP": "0.7"}
    repo.data["services"]["b"]["extra_args"] = ["--x-loading", "30", "--x-die-after", "0.2"]
    second = repo.commit("tune all three; b is broken")
    code, doc, err = deploy(cli, repo, "--drain")
    assert code == 1
    result = host_doc(doc, "h1")["result"]
    assert [d["service"] for d in result["done"]] == ["a"]
    assert result["failed"]["service"] == "b" and result["pending"] == ["c"]
    assert "service b" in err and "(pending, left as they run: c)" in err
    assert repo.marker("h1", "a")["revision"] == second  # type: ignore[index]
    assert repo.marker("h1", "b")["revision"] == first  # type: ignore[index]
    assert repo.marker("h1", "c")["revision"] == first  # type: ignore[index]
    assert repo.record("h1", "c")["pid"] == c_pid  # type: ignore[index]  # untouched
    assert healthy(lab, "h1", 8082)

    repo.data["services"]["b"]["extra_args"] = []
    repo.commit("b: fixed")
    code, doc, err = deploy(cli, repo, "--drain")
    assert code == 0, err
    assert [d["service"] for d in host_doc(doc, "h1")["result"]["done"]] == ["b", "c"]
    converged(cli, repo, "h1", ["a", "b", "c"])


def test_a_second_deploy_to_a_locked_host_fails_at_once(
    cli, fleet, lab, deploy_env: dict[str, str]
) -> None:
    repo = fleet({"a": {"extra_args": ["--x-loading", "3"]}})
    first = subprocess.Popen(
        [sys.executable, str(HERE / "inferfleet_entry.py"), "deploy", "h1", "-y",
         "--file", str(repo.fleet_file)],
        env={**__import__("os").environ, **deploy_env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        lock = lock_for(Repo.containing(repo.checkouts["h1"]), "h1")
        deadline = time.monotonic() + 30
        while lock.holder() is None and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.05)
        holder = lock.holder()
        assert holder is not None, "the first deploy never took the lock"
        started = time.monotonic()
        second = cli("deploy", "h1", "-y", "--file", str(repo.fleet_file))
        took = time.monotonic() - started
        assert second.code == 1
        assert "host h1 is locked by apply of HEAD after a pull" in second.stderr
        assert f"pid {holder.pid}" in second.stderr and "since" in second.stderr
        assert took < 10  # at once: it does not wait for the first one's health gate
        out, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
    converged(cli, repo, "h1", ["a"])


def test_a_dirty_checkout_on_the_host_is_refused_and_left_alone(cli, fleet, lab) -> None:
    repo = fleet({"a": {}})
    assert deploy(cli, repo, "h1")[0] == 0
    pid = repo.record("h1", "a")["pid"]  # type: ignore[index]
    repo.data["services"]["a"]["parallel"] = 2
    repo.commit("a: two slots")
    edited = repo.checkouts["h1"] / "fleet.yaml"
    edited.write_text(edited.read_text() + "# edited by hand on the host\n")
    code, doc, _err = deploy(cli, repo, "h1")
    assert code == 1
    error = host_doc(doc, "h1")["error"]
    assert "has uncommitted changes (fleet.yaml)" in error["message"]
    assert repo.record("h1", "a")["pid"] == pid and healthy(lab, "h1")  # type: ignore[index]
    assert "# edited by hand" in edited.read_text()  # nothing of the host's work is lost
    git(repo.checkouts["h1"], "checkout", "--", "fleet.yaml")
    converged(cli, repo, "h1", ["a"])
    assert repo.record("h1", "a")["pid"] != pid  # type: ignore[index]


def test_a_diverged_checkout_on_the_host_is_not_merged(cli, fleet, lab) -> None:
    repo = fleet({"a": {}})
    host = repo.checkouts["h1"]
    (host / "notes.md").write_text("a local commit on the host\n")
    git(host, "add", "notes.md")
    git(host, "commit", "-qm", "local note")
    repo.commit("upstream change", {"README.md": "# fleet\n\nchanged\n"})
    code, doc, _err = deploy(cli, repo, "h1")
    assert code == 1
    error = host_doc(doc, "h1")["error"]
    assert "has diverged from origin/main (1 local commit" in error["message"]
    assert "reset --hard origin/main" in error["hint"]
    assert repo.marker("h1", "a") is None
    git(host, "reset", "-q", "--hard", "origin/main")
    converged(cli, repo, "h1", ["a"])


def test_dry_run_prints_the_exact_actions_and_changes_nothing(cli, fleet, lab) -> None:
    repo = fleet({"a": {}})
    assert deploy(cli, repo, "h1")[0] == 0
    pid = repo.record("h1", "a")["pid"]  # type: ignore[index]
    repo.data["services"]["a"]["parallel"] = 2
    new = repo.commit("a: two slots")
    result = cli("deploy", "h1", "--dry-run", "--file", str(repo.fleet_file))
    assert result.code == 0, result.stderr
    text = result.stdout
    for expected in (
        "gate             model tiny: 1 file(s)",
        "gate             runtime binary",
        f"stop             stop pid {pid} (recorded",
        f"wait-port        wait until {lab.hosts['h1'].address}:8080 is free",
        "start            start",
        f"marker           record revision {new[:12]}",
    ):
        assert expected in text, expected
    assert git(repo.remote, "rev-parse", "main").strip() != new  # not pushed
    assert repo.checkout_head("h1") != new  # not pulled
    assert repo.record("h1", "a")["pid"] == pid  # type: ignore[index]
    # Without -y and without a terminal to ask on, nothing is deployed either.
    unasked = cli("deploy", "h1", "--file", str(repo.fleet_file))
    assert unasked.code == 2 and "pass -y" in unasked.stderr
    assert "its section of the fleet file changed" in unasked.stdout  # the plan was shown
    assert git(repo.remote, "rev-parse", "main").strip() != new

    (repo.operator / "fleet.yaml").write_text(repo.fleet_file.read_text() + "# wip\n")
    refused = cli("deploy", "h1", "-y", "--file", str(repo.fleet_file))
    assert refused.code == 2
    assert "the working tree" in refused.stderr and "uncommitted changes" in refused.stderr
    assert git(repo.remote, "rev-parse", "main").strip() != new


def test_a_host_without_a_checkout_or_without_inferfleet_says_what_to_install(
    cli, fleet, lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = fleet({"a": {"host": "h1"}, "b": {"host": "h2"}})
    shutil.rmtree(repo.checkouts["h2"])
    code, doc, _err = deploy(cli, repo, "h2")
    assert code == 1
    error = host_doc(doc, "h2")["error"]
    assert error["message"] == (
        f"there is no checkout of the fleet repository at {repo.checkouts['h2']}"
    )
    assert "clone it there once" in error["hint"]

    monkeypatch.setenv("INFERFLEET_REMOTE_COMMAND", "/nonexistent/bin/inferfleet")
    code, doc, _err = deploy(cli, repo, "h1")
    assert code == 1
    error = host_doc(doc, "h1")["error"]
    assert "inferfleet is not installed on h1" in error["message"]
    assert "INFERFLEET_REMOTE_COMMAND" in error["hint"]


def test_rollback_to_an_explicit_revision_is_gated_and_recorded(cli, fleet, lab) -> None:
    repo = fleet({"a": {}})
    first = repo.head()
    assert deploy(cli, repo, "h1")[0] == 0
    repo.data["services"]["a"]["parallel"] = 3
    repo.commit("a: three slots")
    assert deploy(cli, repo, "h1")[0] == 0
    argv = repo.record("h1", "a")["argv"]  # type: ignore[index]
    assert argv[argv.index("--parallel") + 1] == "3"

    back = cli("rollback", "a", "--to", first[:10], "--file", str(repo.fleet_file), "--json")
    assert back.code == 0, back.stderr
    marker = repo.marker("h1", "a")
    assert marker is not None and marker["revision"] == first
    argv = repo.record("h1", "a")["argv"]  # type: ignore[index]
    assert argv[argv.index("--parallel") + 1] == "1" and healthy(lab, "h1")

    unknown = cli("rollback", "a", "--to", "0" * 40, "--file", str(repo.fleet_file))
    assert unknown.code == 1
    assert "is not in the checkout" in unknown.stderr
    assert repo.marker("h1", "a")["revision"] == first  # type: ignore[index]
