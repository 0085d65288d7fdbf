"""A host's side of a no-op deploy starts fast: `apply --facts --no-states` (what `rollback`
reads) and an apply with nothing to do import neither the renderers, the backends nor
the HTTP stack (they load only when a service has work), nor rich (JSON only)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deploy_repo import FleetRepo
from helpers.imports import imported_by, under

pytestmark = pytest.mark.slow

# (psutil stays: the host lock names its holder by pid + create time, io/pids.py.)
LAUNCH = ("inferfleet.render", "inferfleet.backends", "inferfleet.probe", "httpx")


@pytest.fixture
def repo(tmp_path: Path, tiny_model: dict[str, Any], _isolated_state: Path) -> FleetRepo:
    data = {
        "version": 1,
        "hosts": {"here": {"address": "127.0.0.1"}},
        "runtimes": {"fake": {"kind": "llama.cpp", "binary": "/bin/false"}},
        "models": {"tiny": tiny_model},
        "services": {},
    }
    repo = FleetRepo.create(tmp_path / "fleet", data, hosts=[])
    repo.states = {"here": _isolated_state}
    return repo


def test_the_facts_plan_reads_load_no_launch_machinery(repo: FleetRepo) -> None:
    args = ("apply", "--file", str(repo.fleet_file), "--host", "here", "--facts", "--no-states")
    modules = imported_by(*args)
    assert under(modules, *LAUNCH) == set()
    assert under(modules, "rich.console", "rich.table") == set()


def test_an_apply_with_nothing_to_do_loads_no_launch_machinery(cli, repo: FleetRepo) -> None:
    first = cli("apply", "--file", str(repo.fleet_file), "--json")
    assert first.code == 0, first.stderr
    assert json.loads(first.stdout)["selected"] == []
    modules = imported_by("apply", "--file", str(repo.fleet_file), "--host", "here", "--events")
    assert under(modules, *LAUNCH) == set()
    assert under(modules, "rich.console", "rich.table") == set()
