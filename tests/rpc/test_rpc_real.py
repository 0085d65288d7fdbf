"""One model across two test hosts: ggml-rpc-server on h2, llama-server --rpc on h1.

Deployed by ``deploy`` (the worker's host first), over real ssh into network
namespaces, with the pinned build and the real model. The server's own log
says where the weights went; budget said the same beforehand. Killing the
worker turns the service red in ``status``, naming the worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from deploy_hosts import Lab
from helpers.rpc_fleet import SERVICE, WORKER_PORT

from inferfleet.budget.memreport import parse_log
from inferfleet.fleetfile.rpc import worker_unit

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.needs_root]
UNIT = worker_unit(SERVICE, "h2")
MIB = 1 << 20


def _split_service(lab: Lab) -> dict[str, Any]:
    return {
        "host": "h1",
        "runtime": "llama-cpp",
        "model": "gemma3-270m",
        "alias": "gemma-split",
        "bind": lab.hosts["h1"].address,
        "exposure": {"level": "lan", "reason": "the tests reach it from the root namespace"},
        "port": 8080,
        "ctx_per_slot": 1024,
        "parallel": 1,
        "devices": ["cpu0"],
        "health": {"timeout": "3m"},
        "extra_args": ["-lv", "4"],  # the per-buffer lines (model buffer size = ...)
        "rpc": [{"host": "h2", "device": "cpu0", "port": WORKER_PORT}],
    }


def test_a_model_split_over_an_rpc_worker_serves_and_reports_it(
    cli, fleet, lab: Lab, real_parts
) -> None:
    repo = fleet({SERVICE: _split_service(lab)}, **real_parts)
    # 900 MiB here, 1000 MiB on the worker: 9 of the 19 layer slots stay on h1
    for host, memory in (("h1", "900MiB"), ("h2", "1000MiB")):
        repo.data["hosts"][host]["devices"] = [{"name": "cpu0", "vendor": "cpu", "memory": memory}]
    repo.commit("split gemma over h2's rpc worker")
    file = str(repo.fleet_file)

    budget = json.loads(cli("budget", SERVICE, "--file", file, "--json").stdout)
    [split] = budget["rpc"]
    assert split["n_gpu_layers"] == 10 and split["fits"]
    planned = {pool["device"]: pool["weights_bytes"] for pool in split["pools"]}

    done = cli("deploy", "h1", "h2", "-y", "--file", file, "--json")
    assert done.code == 0, done.stderr + done.stdout
    worker = repo.record("h2", UNIT)
    assert worker is not None
    assert psutil.Process(worker["pid"]).cmdline()[0].endswith("/bin/ggml-rpc-server")
    server = repo.record("h1", SERVICE)
    assert server is not None
    argv = psutil.Process(server["pid"]).cmdline()
    endpoint = f"{lab.hosts['h2'].address}:{WORKER_PORT}"
    assert argv[argv.index("--rpc") + 1] == endpoint
    assert argv[argv.index("--n-gpu-layers") + 1] == "10"

    base = f"http://{lab.hosts['h1'].address}:8080"
    answer = httpx.post(
        f"{base}/completion",
        json={"prompt": "The capital of France is", "n_predict": 8, "ignore_eos": True},
        timeout=120,
    ).json()
    assert answer["tokens_predicted"] == 8 and answer["content"]

    # What the server logged per device, against budget's split (within 5%).
    buffers = [b for b in parse_log(Path(server["log"])).buffers if b.what == "model"]
    on_host = sum(b.mib for b in buffers if b.buffer.startswith("CPU")) * MIB
    on_worker = sum(b.mib for b in buffers if b.buffer == f"RPC0[{endpoint}]") * MIB
    assert on_worker > 0
    assert abs(on_host - planned["CPU"]) <= 0.05 * planned["CPU"]
    assert abs(on_worker - planned["RPC0"]) <= 0.05 * planned["RPC0"]

    status = json.loads(cli("status", "--file", file, "--json").stdout)
    rows = {row["service"]: row for row in status["services"]}
    assert rows[SERVICE]["state"] == "healthy", rows[SERVICE]
    assert rows[UNIT]["state"] == "healthy", rows[UNIT]["detail"]

    # The worker dies: the service is red, and says which worker.
    os.kill(worker["pid"], signal.SIGKILL)
    with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
        psutil.Process(worker["pid"]).wait(timeout=10)  # reaped by its parent, or a zombie
    status = json.loads(cli("status", "--file", file, "--json").stdout)
    rows = {row["service"]: row for row in status["services"]}
    assert rows[SERVICE]["state"] == "unhealthy"
    assert f"rpc worker on h2 ({endpoint}) is unreachable" in rows[SERVICE]["detail"]
    assert rows[UNIT]["state"] != "healthy"
