"""The contract gate after health, with the real llama-server on the real model.

``apply`` on this machine (the host ``here``) of a service whose server is
healthy but breaks its contract: the fleet file declares a per-slot window
of 2048 (L-25) and the runtime is a ``binary:`` wrapper (pinned by version
and sha256, L-42) that execs the real llama-server with ``-c 1024``
appended, so the server really gets half. It ends *deployed, contract
failing*: the server keeps running, the marker records the revision with
``contract: failing`` and the evidence (L-41), the exit code is 3, status
shows it red, the planner redeploys it ("contract failing") and no no-op
memo is written; a fix followed by apply turns it green. ``--drain`` stops at
the first contract failure, later services stay pending (L-40).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_repo import FleetRepo, stop_recorded
from helpers import free_port

from inferfleet.artifacts.manifest import declared_files
from inferfleet.artifacts.materialise import materialise
from inferfleet.artifacts.verify import gate
from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.deploy import noop, pins
from inferfleet.errors import EXIT_CONTRACT
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.install import llamacpp_build

pytestmark = pytest.mark.slow

SERVER_CTX = 1024  # what the wrapper gives the server, whatever the fleet file says


@pytest.fixture(scope="session")
def real_model() -> dict[str, Any]:
    """The embedded example's model (verified once, cached) and its built llama-server."""
    loaded = load_fleet(embedded_example())
    fleet = loaded.fleet
    source = fleet.runtimes["llama-cpp"].source
    assert source is not None
    built = llamacpp_build.installed(source) or llamacpp_build.install(source)[0]
    model = fleet.models["gemma3-270m"]
    materialise("gemma3-270m", model, declared_files(model, loaded.root), lambda _t: None)
    gate("gemma3-270m", model, loaded.root, where="the real parts")
    return {
        "binary": built.binary,
        "model": model.model_dump(exclude_none=True, exclude_defaults=True),
    }


@pytest.fixture
def wrapper(tmp_path: Path, real_model: dict[str, Any]) -> dict[str, str]:
    """A ``binary:`` runtime: the real llama-server with ``-c 1024`` appended (last one wins)."""
    path = tmp_path / "runtime" / "llama-server"
    path.parent.mkdir(parents=True)
    real = real_model["binary"]
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then exec {real} --version; fi\n'
        f'exec {real} "$@" -c {SERVER_CTX}\n'
    )
    path.chmod(0o755)
    version = pins.binary_version("llama.cpp", path, where="test", hint="")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"kind": "llama.cpp", "binary": str(path), "version": version, "sha256": sha}


def service(port: int, ctx: int, alias: str) -> dict[str, Any]:
    return {
        "host": "here",
        "runtime": "wrapped",
        "model": "gemma3-270m",
        "alias": alias,
        "port": port,
        "ctx_per_slot": ctx,
        "parallel": 1,
        "health": {"timeout": "2m"},
    }


@pytest.fixture
def make_repo(
    tmp_path: Path,
    wrapper: dict[str, str],
    real_model: dict[str, Any],
    _isolated_state: Path,
) -> Iterator[Any]:
    def make(services: dict[str, dict[str, Any]]) -> FleetRepo:
        data = {
            "version": 1,
            "hosts": {"here": {"address": "127.0.0.1"}},
            "runtimes": {"wrapped": wrapper},
            "models": {"gemma3-270m": real_model["model"]},
            "services": services,
        }
        repo = FleetRepo.create(tmp_path / "fleet", data, hosts=[])
        repo.states = {"here": _isolated_state}
        return repo

    yield make
    stop_recorded(_isolated_state)


def apply(cli: Any, repo: FleetRepo, *args: str) -> Any:
    return cli("apply", "--file", str(repo.fleet_file), *args)


def status_row(cli: Any, repo: FleetRepo, name: str) -> dict[str, Any]:
    result = cli("status", "--file", str(repo.fleet_file), "--json")
    rows = {s["service"]: s for s in json.loads(result.stdout)["services"]}
    return {"code": result.code, **rows[name]}


def test_a_healthy_server_that_breaks_its_window_is_deployed_contract_failing_until_fixed(
    cli: Any, make_repo: Any, _isolated_state: Path
) -> None:
    """L-25, L-41: healthy is not done; the evidence is kept and shown, the fix turns it green."""
    port = free_port()
    repo = make_repo({"a": service(port, 2048, "gemma-a")})
    result = apply(cli, repo, "--json")
    assert result.code == EXIT_CONTRACT, result.stderr
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and doc["outcome"] == "contract-failing"
    [done] = doc["done"]
    assert done["service"] == "a" and done["outcome"] == "contract-failing"
    assert done["contract"] == "failing"
    evidence = "context per slot: server reports n_ctx 1024 per slot, fleet file says 2048 (L-25)"
    assert done["evidence"] == [evidence]
    assert doc["failed"]["error"] == "ContractFailingError"
    assert doc["failed"]["evidence"] == [evidence]
    assert evidence in doc["failed"]["message"]
    # The server stays running (it is healthy); the marker records the revision, failing.
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    marker = repo.marker("here", "a")
    assert marker is not None and marker["revision"] == repo.head()
    assert marker["contract"] == "failing" and marker["contract_evidence"] == [evidence]
    # No no-op memo: a contract-failing service is not fine.
    assert noop.read(repo.operator / ".git") is None

    # status and its exit code: red, with the first evidence line.
    row = status_row(cli, repo, "a")
    assert row["code"] == 1
    assert row["state"] == "contract-failing"
    assert row["detail"] == f"contract failing: {evidence}"

    # The planner does not keep it: a plain deploy applies it again, and it is probed again.
    plan = json.loads(apply(cli, repo, "--dry-run", "--json").stdout)
    assert [(i["service"], i["action"], i["reasons"]) for i in plan["plan"]] == [
        ("a", "deploy", ["contract failing"])
    ]
    human = apply(cli, repo)
    assert human.code == EXIT_CONTRACT
    err = " ".join(human.stderr.split())
    assert "service a: healthy, but its contract probe fails: context per slot" in err
    assert "Traceback" not in human.stderr
    shown = " ".join(human.stdout.split())
    assert "a contract-failing" in shown and f"contract a: {evidence}" in shown

    # The fix: declare what the server really gets; the apply passes and it is green.
    repo.data["services"]["a"]["ctx_per_slot"] = SERVER_CTX
    repo.commit("declare the window the server gets")
    fixed = apply(cli, repo, "--json")
    assert fixed.code == 0, fixed.stderr
    fixed_doc = json.loads(fixed.stdout)
    assert fixed_doc["outcome"] == "ok"
    assert [(d["outcome"], d["contract"]) for d in fixed_doc["done"]] == [("deployed", "passed")]
    marker = repo.marker("here", "a")
    assert marker is not None and marker["contract"] == "passed"
    assert marker["contract_evidence"] == []
    row = status_row(cli, repo, "a")
    assert row["state"] == "healthy" and row["code"] == 0
    # Now everything is kept: the memo of the no-op is written again.
    assert noop.read(repo.operator / ".git") is not None


def test_drain_stops_at_the_first_contract_failure(
    cli: Any, make_repo: Any, _isolated_state: Path
) -> None:
    """L-40: as at a failed health gate, later services stay pending and untouched."""
    ports = {"a": free_port(), "b": free_port()}
    repo = make_repo({n: service(p, SERVER_CTX, f"gemma-{n}") for n, p in ports.items()})
    first = apply(cli, repo, "--json")
    assert first.code == 0, first.stderr
    before_b = repo.marker("here", "b")
    record_b = repo.record("here", "b")
    assert before_b is not None and record_b is not None
    for name in ports:
        repo.data["services"][name]["ctx_per_slot"] = 2048
    repo.commit("promise a larger window than the runtime gives")
    drained = apply(cli, repo, "--drain", "--json")
    assert drained.code == EXIT_CONTRACT, drained.stderr
    doc = json.loads(drained.stdout)
    assert doc["outcome"] == "contract-failing"
    assert [(d["service"], d["outcome"]) for d in doc["done"]] == [("a", "contract-failing")]
    assert doc["failed"]["service"] == "a" and doc["pending"] == ["b"]
    # b was not touched: same marker, same process.
    assert repo.marker("here", "b") == before_b
    after_b = repo.record("here", "b")
    assert after_b is not None and after_b["pid"] == record_b["pid"]
