"""stop / start / restart / logs and holds of a process-backend service on a remote host.

The host is one of the deploy lab's network namespaces with its own sshd; each
verb runs here, through the real entry point, and reaches the host over ssh
(the deploy's connector), where it runs in the host's checkout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_hosts import Lab

HERE = Path(__file__).resolve().parent
ENTRY = HERE / "inferfleet_entry.py"

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]


def healthy(lab: Lab) -> bool:
    try:
        return httpx.get(f"http://{lab.hosts['h1'].address}:8080/health", timeout=3).is_success
    except httpx.TransportError:
        return False


def test_stop_hold_deploy_start_restart_and_logs_over_ssh(
    cli: Any, fleet: Any, lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This checkout's code on the host, whichever checkout the venv was installed from.
    src = HERE.parents[1] / "src"
    command = f"env PYTHONPATH={src} {sys.executable} {ENTRY}"
    monkeypatch.setenv("INFERFLEET_REMOTE_COMMAND", command)
    repo = fleet({"a": {}})
    file = str(repo.fleet_file)
    # Positionals name services; a host there still works (scripts), said on stderr.
    first = cli("deploy", "h1", "-y", "--file", file)
    assert first.code == 0, first.stderr + first.stdout
    assert "h1 is a host: taken as --host h1" in first.stderr
    assert healthy(lab)

    logs = cli("logs", "a", "--file", file, "-n", "5")
    assert logs.code == 0, logs.stderr
    assert f"fake llama-server listening on {lab.hosts['h1'].address}:8080" in logs.stdout

    stopped = cli("stop", "a", "--file", file, "--hold", "rack move")
    assert stopped.code == 0, stopped.stderr + stopped.stdout
    assert "a on h1: stopped" in stopped.stdout and "held: rack move" in stopped.stdout
    assert not healthy(lab)
    assert repo.marker("h1", "a") is None
    status = cli("status", "a", "--file", file, "--json")
    [row] = json.loads(status.stdout)["services"]
    assert row["state"] == "held" and "rack move" in row["detail"]

    again = cli("deploy", "--host", "h1", "-y", "--file", file)
    assert again.code == 0, again.stderr + again.stdout
    assert "left down: a (held: rack move" in " ".join(again.stderr.split())
    assert not healthy(lab)

    started = cli("start", "a", "--file", file)
    assert started.code == 0, started.stderr + started.stdout
    assert healthy(lab)
    record = repo.record("h1", "a")
    assert record is not None
    restarted = cli("restart", "a", "--file", file)
    assert restarted.code == 0, restarted.stderr + restarted.stdout
    assert healthy(lab)
    now = repo.record("h1", "a")
    assert now is not None and now["pid"] != record["pid"]
    marker = repo.marker("h1", "a")
    assert marker is not None and marker["revision"] == repo.head()

    # Bad input stops nothing there, and says why.
    bad = cli("stop", "a", "--file", file, "--hold", "")
    assert bad.code == 2 and "one printable line" in bad.stdout + bad.stderr
    assert healthy(lab)
