"""L-58 on the real llama-server: a server beyond loopback requires its API key, and
everything inferfleet sends to it carries the key.

The server binds 10.251.9.1, an address of a veth pair inside a network
namespace this test creates (``unshare -n``): beyond loopback, as on a LAN,
yet reachable from nothing but the namespace. ``inferfleet up`` (the CLI,
process backend, contract gate on) runs in it:

- with a secrets_env that holds no ``LLAMA_API_KEY``, up refuses and nothing
  listens;
- with the key, up passes its contract gate (``/v1/models``, ``/props`` and a
  completion, each keyed); without the key the server refuses those routes
  (401) while ``/health`` stays open; ``status`` reads ``/slots`` and
  ``/metrics`` with the key (from the service's secrets_env on its own host).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from helpers.real_server import SERVICE, fleet_data, write_fleet

from inferfleet.backends.records import RecordStore
from inferfleet.io import process

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.needs_root]

ADDRESS = "10.251.9.1"
KEY = "k-" + "7f3a9c1e5b" * 3

# Runs inside the namespace: the CLI verbs, then plain requests with and without the key.
DRIVER = r"""
import json, subprocess, sys, httpx
fleet, secrets, key, out, port = sys.argv[1:6]
base = f"http://ADDRESS:{port}"
found = {}

def cli(name, *args):
    done = subprocess.run([sys.executable, "-m", "inferfleet", *args], capture_output=True,
                          text=True, timeout=600)
    found[name] = {"rc": done.returncode, "out": done.stdout, "err": done.stderr}

def listens():
    try:
        httpx.get(base + "/health", timeout=3)
        return True
    except httpx.TransportError:
        return False

try:
    cli("refused", "up", "-f", fleet, "--json")
    found["listens_after_refusal"] = listens()
    with open(secrets, "a") as f:
        f.write(f"LLAMA_API_KEY={key}\n")
    cli("up", "up", "-f", fleet, "--json")
    codes = {}
    for path in ("/health", "/v1/models", "/props", "/slots", "/metrics"):
        codes[path] = [httpx.get(base + path, timeout=10).status_code,
                       httpx.get(base + path, headers={"Authorization": f"Bearer {key}"},
                                 timeout=10).status_code]
    found["codes"] = codes
    cli("status", "status", "-f", fleet, "--json")
finally:
    cli("down", "down", "-f", fleet)
    with open(out, "w") as f:
        json.dump(found, f)
""".replace("ADDRESS", ADDRESS)

SETUP = (
    "ip link set lo up && ip link add k0 type veth peer name k1 && "
    f"ip addr add {ADDRESS}/24 dev k0 && ip link set k1 up && ip link set k0 up && "
    'exec "$@"'
)


@pytest.fixture
def unshare() -> str:
    found = shutil.which("unshare")
    if found is None or shutil.which("ip") is None:
        pytest.fail("unshare and ip (util-linux, iproute2) are needed: install them")
    return found


def test_a_server_beyond_loopback_requires_its_key_and_inferfleet_sends_it(
    tmp_path: Path, port: int, unshare: str, gemma_file: Path, llama_server_binary: Path
) -> None:
    secrets = tmp_path / "secrets.env"
    secrets.write_text("# the key is added once the refusal is seen\n")
    secrets.chmod(0o600)
    exposure = {"level": "lan", "reason": "the test reaches it in its own namespace"}
    data = fleet_data(port, bind=ADDRESS, exposure=exposure, secrets_env=str(secrets))
    fleet = write_fleet(tmp_path / "fleet.yaml", data)
    out = tmp_path / "found.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("INFERFLEET_KEY_GEMMA", None)  # the key comes from the secrets file only
    argv = [sys.executable, "-c", DRIVER, str(fleet), str(secrets), KEY, str(out), str(port)]
    try:
        done = subprocess.run(
            [unshare, "-n", "sh", "-c", SETUP, "sh", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        _stop_leftovers(Path(env["INFERFLEET_STATE_DIR"]))
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(out.read_text())

    refused = found["refused"]
    assert refused["rc"] == 2, refused
    said = " ".join(refused["err"].split())
    assert f"services.{SERVICE}.secrets_env" in said and "holds no LLAMA_API_KEY" in said
    assert "Traceback" not in refused["err"]
    assert found["listens_after_refusal"] is False  # nothing started

    assert found["up"]["rc"] == 0, found["up"]  # the contract gate passed, with the key
    codes = found["codes"]
    assert codes["/health"] == [200, 200]  # the health gate needs no key
    for path in ("/v1/models", "/props", "/slots", "/metrics"):
        assert codes[path] == [401, 200], (path, codes)

    status = json.loads(found["status"]["out"])
    (row,) = [s for s in status["services"] if s["service"] == SERVICE]
    assert row["state"] == "healthy", row
    assert row["slots"] == 2 and row["metrics"] == "ok", row  # /slots and /metrics, keyed
    assert not any("401" in note for note in row["notes"]), row["notes"]
    assert KEY not in found["status"]["out"] + found["up"]["out"] + found["up"]["err"]


def _stop_leftovers(state: Path) -> None:
    """Whatever server the driver left behind (it stops its own with `down`), by its pid."""
    store = RecordStore(state)
    for name in store.names():
        record = store.read(name)
        if record is None:
            continue
        try:
            proc = psutil.Process(record.pid)
        except psutil.NoSuchProcess:
            continue
        process.terminate(proc, grace=5.0)
