"""``up`` takes apply's contract gate after health: the same executor, no copy.

The real llama-server behind a pinned ``binary:`` wrapper that appends
``-c 1024`` while the fleet file declares 2048 per slot (L-25): ``up`` ends
with the server running, exit 3, the evidence shown and status red; with the
window fixed, ``up`` passes and status is green.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from helpers.real_server import ALIAS, SERVICE, fleet_data

from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.deploy import local, pins
from inferfleet.errors import EXIT_CONTRACT
from inferfleet.fleetfile.loader import load_fleet

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_up_of_a_server_breaking_its_window_is_contract_failing_then_fixed(
    cli: Any, tmp_path: Path, port: int, _isolated_state: Path
) -> None:
    loaded = load_fleet(embedded_example())
    local.prepare(loaded, SERVICE, local.Hooks())  # the runtime and model, cached
    source = loaded.fleet.runtimes["llama-cpp"].source
    assert source is not None
    built = local.llamacpp_build.installed(source)
    assert built is not None
    wrapper = tmp_path / "bin" / "llama-server"
    wrapper.parent.mkdir()
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then exec {built.binary} --version; fi\n'
        f'exec {built.binary} "$@" -c 1024\n'
    )
    wrapper.chmod(0o755)
    data = fleet_data(port, ctx_per_slot=2048, parallel=1, runtime="wrapped")
    data["runtimes"]["wrapped"] = {
        "kind": "llama.cpp",
        "binary": str(wrapper),
        "version": pins.binary_version("llama.cpp", wrapper, where="test", hint=""),
        "sha256": hashlib.sha256(wrapper.read_bytes()).hexdigest(),
    }
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        failing = cli("up", str(fleet), "--json")
        assert failing.code == EXIT_CONTRACT, failing.stderr
        [row] = json.loads(failing.stdout)["services"]
        evidence = (
            "context per slot: server reports n_ctx 1024 per slot, fleet file says 2048 (L-25)"
        )
        assert row["contract"] == "failing" and row["evidence"] == [evidence]
        assert "healthy, but its contract probe fails" in " ".join(failing.stderr.split())
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200  # still runs
        status = cli("status", "--file", str(fleet), "--json")
        [svc] = json.loads(status.stdout)["services"]
        assert status.code == 1 and svc["state"] == "contract-failing"
        assert svc["detail"] == f"contract failing: {evidence}"

        data["services"][SERVICE]["ctx_per_slot"] = 1024
        fleet.write_text(yaml.safe_dump(data, sort_keys=False))
        fixed = cli("up", str(fleet), "--json")
        assert fixed.code == 0, fixed.stderr
        [row] = json.loads(fixed.stdout)["services"]
        assert row["contract"] == "passed" and row["evidence"] == []
        assert row["checks"][0]["name"] == "alias listed" and row["checks"][0]["ok"]
        assert repr(ALIAS) in row["checks"][0]["detail"]
        status = cli("status", "--file", str(fleet), "--json")
        assert status.code == 0
        assert json.loads(status.stdout)["services"][0]["state"] == "healthy"
    finally:
        for record in (_isolated_state / "services").glob("*.json"):
            with contextlib.suppress(ProcessLookupError, ValueError, KeyError):
                os.kill(json.loads(record.read_text())["pid"], signal.SIGKILL)
