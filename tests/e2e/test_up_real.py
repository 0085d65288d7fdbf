"""`inferfleet up` / `status` / `down` with the real llama-server and model."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx
import psutil
import pytest
import yaml
from helpers import no_process_on, server_script  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def status_doc(cli, fleet: Path) -> dict:
    result = cli("status", "--file", str(fleet), "--json")
    doc = json.loads(result.stdout)
    assert doc["schema"] == "inferfleet.status/v2"
    return doc["services"][0] | {"_code": result.code}


def test_up_status_up_again_restart_and_down(cli, local_fleet: Path, port: int, servers_of) -> None:
    result = cli("up", str(local_fleet), "--json")
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "inferfleet.up/v1"
    up = doc["services"][0]
    servers_of.append(up["pid"])
    assert up["action"] == "started" and up["health"] == "healthy"
    assert up["url"] == f"http://127.0.0.1:{port}"
    checks = {c["name"]: c["ok"] for c in up["checks"]}
    assert checks == {
        "alias listed": True,
        "context per slot": True,
        "completion of 16 tokens": True,
    }

    # The process on the port is the recorded llama-server, with the per-slot pool (L-25).
    proc = psutil.Process(up["pid"])
    cmd = proc.cmdline()
    assert Path(cmd[0]).name == "llama-server"
    assert cmd[cmd.index("--ctx-size") + 1] == "8192" and cmd[cmd.index("--parallel") + 1] == "2"
    models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
    assert models["data"][0]["id"] == "gemma3-270m"
    assert models["data"][0]["meta"]["n_ctx"] == 4096

    st = status_doc(cli, local_fleet)
    assert st["_code"] == 0
    assert st["state"] == "healthy" and st["pid"] == up["pid"]
    assert st["ctx_per_slot"] == 4096 and st["parallel"] == 2
    assert "b11434" in st["runtime_version"] or "11434" in st["runtime_version"]

    # Second `up` with nothing changed: the running process is left alone.
    again = json.loads(cli("up", str(local_fleet), "--json").stdout)["services"][0]
    assert again["action"] == "unchanged" and again["pid"] == up["pid"]
    human = cli("up", str(local_fleet))
    assert human.code == 0 and "unchanged" in human.stdout

    # A changed service is restarted: new pid, the old one is gone.
    data = yaml.safe_load(local_fleet.read_text())
    data["services"]["gemma"]["parallel"] = 1
    data["services"]["gemma"]["ctx_per_slot"] = 2048
    local_fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    changed = json.loads(cli("up", str(local_fleet), "--json").stdout)["services"][0]
    servers_of.append(changed["pid"])
    assert changed["action"] == "restarted" and changed["pid"] != up["pid"]
    assert not psutil.pid_exists(up["pid"]) or psutil.Process(up["pid"]).status() == "zombie"
    models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
    assert models["data"][0]["meta"]["n_ctx"] == 2048

    down = cli("down", "--file", str(local_fleet), "--json")
    assert down.code == 0
    assert json.loads(down.stdout)["services"][0]["outcome"] in {"terminated", "killed"}
    assert no_process_on(port)
    assert (
        not psutil.pid_exists(changed["pid"]) or psutil.Process(changed["pid"]).status() == "zombie"
    )
    st = status_doc(cli, local_fleet)
    assert st["state"] == "stopped" and st["pid"] is None
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


def test_up_refuses_a_port_held_by_another_process(cli, local_fleet: Path, port: int, reap) -> None:
    holder = psutil.Popen([*server_script("hold_port.py"), str(port)], stdout=subprocess.DEVNULL)
    reap.append(holder)
    deadline = time.monotonic() + 10
    while no_process_on(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    result = cli("up", str(local_fleet))
    assert result.code == 1
    err = " ".join(result.stderr.split())
    assert f"port {port} is already held by pid {holder.pid}" in err
    assert "hold_port.py" in err and "Traceback" not in err
    assert holder.is_running()
    st = status_doc(cli, local_fleet)
    assert st["state"] == "foreign" and f"pid {holder.pid}" in st["detail"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("sha256", "0" * 64, "gemma-3-270m-q4_k_m.gguf: sha256 a5fd3b62"),
        ("size", 253113023, "253,113,024 bytes on disk, 253,113,023 declared (L-08)"),
    ],
)
def test_up_refuses_a_model_that_does_not_match_the_fleet_file(
    cli, local_fleet: Path, port: int, field: str, value: object, message: str
) -> None:
    data = yaml.safe_load(local_fleet.read_text())
    data["models"]["gemma3-270m"]["files"][0][field] = value
    local_fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    result = cli("up", str(local_fleet))
    assert result.code == 1
    err = " ".join(result.stderr.split())
    assert message in err and "nothing was stopped or started" in err
    assert no_process_on(port)
    st = status_doc(cli, local_fleet)
    assert st["state"] == "stopped"


def test_a_server_that_cannot_load_fails_the_gate_with_its_log(
    cli, local_fleet: Path, port: int
) -> None:
    data = yaml.safe_load(local_fleet.read_text())
    # A cache type the server refuses: it exits during load.
    data["services"]["gemma"]["extra_args"] = ["--rope-scaling", "nonsense"]
    local_fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    result = cli("up", str(local_fleet))
    assert result.code == 1
    err = result.stderr
    assert "exited" in err and "before it became healthy" in err
    assert "last lines of the service's log" in err
    assert no_process_on(port)
    logs = cli("logs", "gemma", "--file", str(local_fleet), "-n", "5")
    assert logs.code == 0 and logs.stdout.strip()


def test_status_exit_code_and_stale_record(cli, local_fleet: Path, port: int, servers_of) -> None:
    result = cli("up", str(local_fleet), "--json")
    assert result.code == 0, result.stderr
    pid = json.loads(result.stdout)["services"][0]["pid"]
    servers_of.append(pid)
    # Kill the server behind inferfleet's back (by pid): status must say so and exit 1.
    psutil.Process(pid).kill()
    psutil.Process(pid).wait(10) if psutil.pid_exists(pid) else None
    deadline = time.monotonic() + 10
    while not no_process_on(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    st = status_doc(cli, local_fleet)
    assert st["_code"] == 1 and st["state"] == "stale"
    # `up` notices the stale record and starts a fresh server.
    fresh = json.loads(cli("up", str(local_fleet), "--json").stdout)["services"][0]
    servers_of.append(fresh["pid"])
    assert fresh["action"] == "started" and fresh["pid"] != pid
    assert cli("down", "--file", str(local_fleet)).code == 0
    assert no_process_on(port)
