"""A fleet repository whose hosts are bare: their checkout, venv and state live in folders
that do not exist yet (the test hosts share this machine's filesystem, so every host gets
paths of its own)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deploy_hosts import Lab
from deploy_repo import FleetRepo
from helpers.cli import CliResult

Cli = Callable[..., CliResult]


def bare_fleet(lab: Lab, folder: Path, services: dict[str, Any], **top: Any) -> FleetRepo:
    hosts = {}
    for name, host in lab.hosts.items():
        base = folder / "hosts" / name
        hosts[name] = {
            "address": host.address,
            "checkout": str(base / "fleet"),
            "state_dir": str(base / "state"),
            "venv": str(base / "venv"),
        }
    data: dict[str, Any] = {"version": 1, "hosts": hosts, "services": services, **top}
    repo = FleetRepo.create(folder, data, [])  # no host checkouts: bare hosts
    repo.states = {name: folder / "hosts" / name / "state" for name in lab.hosts}
    repo.checkouts = {name: folder / "hosts" / name / "fleet" for name in lab.hosts}
    return repo


def bootstrap(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    cache: Path,
    repo: FleetRepo,
    host: str,
    *args: str,
) -> CliResult:
    """``inferfleet host bootstrap HOST`` with the session's wheel cache."""
    with monkeypatch.context() as patch:
        patch.setenv("INFERFLEET_CACHE_DIR", str(cache))
        return cli("host", "bootstrap", host, "--file", str(repo.fleet_file), *args)


def on_host(lab: Lab, host: str, command: str) -> subprocess.CompletedProcess[str]:
    """A command run on the test host over plain ssh (as a user would check by hand)."""
    return subprocess.run(
        ["ssh", "-F", str(lab.ssh_config), lab.hosts[host].address, command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def document(result: CliResult) -> dict[str, Any]:
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict)
    return doc
