"""The systemd backend against a real systemd, booted with systemd-nspawn.

``inferfleet apply`` runs inside the container (entered with nsenter) the way
deploy runs it on a host: it installs the renderer's unit, reloads systemd
only when a unit changed, enables and restarts it, and holds it to the
health gate on the unit's MainPID. The container shares this machine's
network, so the test checks health on loopback.
"""

from __future__ import annotations

import json
import secrets
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_nspawn import Machine, booted
from deploy_repo import FleetRepo, git
from helpers import free_port
from test_deploy_real import real_parts  # noqa: F401  (the session fixture)

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render.facts import HostFacts
from inferfleet.render.launch import resolve
from inferfleet.render.systemd import service_unit

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.needs_root]
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Machine, Path]]:
    shared = tmp_path_factory.mktemp("nspawn-shared")
    cache = Path.home() / ".cache" / "inferfleet"
    # This checkout with its venv, the interpreter the venv points at (pyenv's
    # prefix), the cached llama-server and model, and a folder for the test's repos.
    interpreter = str(Path(sys.executable).resolve().parents[1])
    binds = [
        (str(ROOT), str(ROOT), True),
        (interpreter, interpreter, True),
        (str(cache), str(cache), True),
        (str(shared), str(shared), False),
    ]
    with booted(f"ift{free_port() % 100000}", binds, shared / "nspawn.log") as booted_machine:
        yield booted_machine, shared


def apply_in(machine: Machine, repo: FleetRepo, *args: str) -> subprocess.CompletedProcess[str]:
    """Push, then `inferfleet apply --pull` inside the container (a clean environment, like ssh)."""
    git(repo.operator, "push", "-q")
    checkout = repo.checkouts["sd"]
    return subprocess.run(
        ["nsenter", "-t", str(machine.leader), "-a", "env", "-i", "HOME=/root",
         "PATH=/usr/sbin:/usr/bin:/sbin:/bin", sys.executable, str(HERE / "inferfleet_entry.py"),
         "apply", "--file", str(checkout / "fleet.yaml"), "--host", "sd", "--pull",
         "--expect", repo.head(), "--json", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip


def make_repo(shared: Path, name: str, services: dict[str, Any], top: dict[str, Any]) -> FleetRepo:
    folder = shared / name
    data = {
        "version": 1,
        "hosts": {"sd": {"address": "127.0.0.1", "ssh": {"user": "root"},
                         "checkout": str(folder / "hosts" / "sd" / "fleet"),
                         "state_dir": str(folder / "hosts" / "sd" / "state")}},
        **top,
        "services": services,
    }  # fmt: skip
    repo = FleetRepo.create(folder, data, hosts=["sd"])
    repo.states = {"sd": folder / "hosts" / "sd" / "state"}
    return repo


def test_a_real_llama_server_as_a_system_unit(machine, real_parts) -> None:  # noqa: F811
    box, shared = machine
    port = free_port()
    service = {"host": "sd", "runtime": "llama-cpp", "model": "gemma3-270m", "port": port,
               "ctx_per_slot": 2048, "backend": "systemd", "health": {"timeout": "3m"}}  # fmt: skip
    repo = make_repo(shared, "real", {"chat": service}, real_parts)
    unit = "inferfleet-chat.service"

    first = apply_in(box, repo)
    assert first.returncode == 0, first.stdout + first.stderr
    doc = json.loads(first.stdout)
    assert [(d["service"], d["outcome"]) for d in doc["done"]] == [("chat", "deployed")]
    kinds = [a["kind"] for a in doc["actions"]]
    assert kinds == ["gate", "gate", "wait-port", "install", "install", "daemon-reload",
                     "enable", "restart", "health", "marker"]  # fmt: skip
    state = box.systemctl_show(unit, "MainPID", "ActiveState", "UnitFileState")
    assert state["ActiveState"] == "active" and state["UnitFileState"] == "enabled"
    models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
    assert models["data"][0]["meta"]["n_ctx"] == 2048
    # The installed unit is the renderer's, for this host's facts.
    loaded = load_fleet(repo.fleet_file)
    facts = HostFacts(user="root", home="/root", cache_dir=str(Path.home() / ".cache/inferfleet"))
    expected = service_unit(resolve(loaded.fleet, loaded.root, "chat", facts)).text()
    installed = box.enter("cat", f"/etc/systemd/system/{unit}")
    assert installed == expected
    marker = repo.marker("sd", "chat")
    assert marker is not None and marker["unit"] == "inferfleet-chat"
    assert f"/etc/systemd/system/{unit}" in marker["installed"]

    # Nothing changed: nothing is done.
    again = json.loads(apply_in(box, repo).stdout)
    assert again["done"] == [] and again["actions"] == []

    # A changed service: the unit changes, systemd reloads, a new MainPID serves.
    repo.data["services"]["chat"]["ctx_per_slot"] = 1024
    repo.commit("chat: smaller window")
    second = apply_in(box, repo)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "daemon-reload" in [a["kind"] for a in json.loads(second.stdout)["actions"]]
    new_state = box.systemctl_show(unit, "MainPID")
    assert new_state["MainPID"] != state["MainPID"]
    models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
    assert models["data"][0]["meta"]["n_ctx"] == 1024

    # Retired: stopped, disabled, its files removed, systemd reloaded.
    del repo.data["services"]["chat"]
    repo.commit("retire chat")
    retired = apply_in(box, repo)
    assert retired.returncode == 0, retired.stdout + retired.stderr
    assert [d["outcome"] for d in json.loads(retired.stdout)["done"]] == ["retired"]
    gone = box.systemctl_show(unit, "LoadState", "ActiveState")
    assert gone == {"LoadState": "not-found", "ActiveState": "inactive"}
    assert repo.marker("sd", "chat") is None
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=3)


def test_a_crash_looping_unit_fails_its_gate_with_the_journal(
    machine, fake_runtime: Path, tiny_model: dict[str, Any]
) -> None:
    box, shared = machine
    runtime = shared / "fake-llama-server"
    runtime.write_text(fake_runtime.read_text())
    runtime.chmod(0o755)
    model_dir = shared / "tiny"
    model_dir.mkdir()
    (model_dir / "tiny.gguf").write_bytes(
        (Path(tiny_model["source"]["path"]) / "tiny.gguf").read_bytes()
    )
    port = free_port()
    service = {"host": "sd", "runtime": "fake", "model": "tiny", "port": port,
               "ctx_per_slot": 512, "backend": "systemd", "health": {"timeout": "20s"},
               "extra_args": ["--x-loading", "30", "--x-die-after", "0.3"],
               "unit": {"restart_sec": "1s"}}  # fmt: skip
    top = {
        "runtimes": {"fake": {"kind": "llama.cpp", "binary": str(runtime)}},
        "models": {"tiny": {**tiny_model, "source": {"path": str(model_dir)}}},
    }
    repo = make_repo(shared, "crash", {"boom": service}, top)
    failed = apply_in(box, repo)
    assert failed.returncode == 1
    doc = json.loads(failed.stdout)
    error = doc["failed"]
    assert error["service"] == "boom" and "unit inferfleet-boom.service is" in error["message"]
    assert "auto-restart (result exit-code)" in error["message"]  # a crash loop, not a hang
    assert "fatal: failed to load model" in error["log_tail"]
    assert repo.marker("sd", "boom") is None

    repo.data["services"]["boom"]["extra_args"] = []
    repo.commit("boom: fixed")
    fixed = apply_in(box, repo)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    assert repo.marker("sd", "boom") is not None

    # A user unit needs linger (L-38); the gate says so before anything is installed.
    repo.data["services"]["boom"]["unit"] = {"scope": "user"}
    repo.commit("boom: as a user unit")
    refused = apply_in(box, repo)
    assert refused.returncode == 1
    assert "linger is off (L-38)" in json.loads(refused.stdout)["failed"]["message"]
    assert box.enter("ls", "/root/.config/systemd/user", check=False) == ""
    assert box.systemctl_show("inferfleet-boom.service", "ActiveState") == {"ActiveState": "active"}


def test_the_auth_proxy_as_a_system_unit_in_front_of_a_real_server(
    machine,
    real_parts,  # noqa: F811
) -> None:
    """The proxy on the spine's systemd backend: apply installs Caddy's unit after the
    service, gates it over HTTPS on its own local CA, keeps it when nothing changed and
    restarts it when its Caddyfile does; the key stays out of the unit (L-55)."""
    from inferfleet.deploy import frontdoor
    from inferfleet.install import caddy as caddy_tool

    caddy_tool.install()  # the pinned binary, in the cache the container reads (cached)
    box, shared = machine
    port, proxy_port = free_port(), free_port()
    key = "sk-" + secrets.token_urlsafe(24)
    keys = shared / "proxy.env"
    keys.write_text(f"INFERFLEET_PROXY_KEY={key}\n")
    keys.chmod(0o600)
    service = {"host": "sd", "runtime": "llama-cpp", "model": "gemma3-270m", "port": port,
               "ctx_per_slot": 2048, "backend": "systemd", "health": {"timeout": "3m"}}  # fmt: skip
    proxy = {
        "host": "sd",
        "bind": "127.0.0.1",
        "port": proxy_port,
        "exposure": {"level": "lan", "reason": "the test reaches it on this machine"},
        "keys_env": str(keys),
        "services": ["chat"],
        "backend": "systemd",
    }
    repo = make_repo(shared, "proxied", {"chat": service}, {**real_parts, "proxy": proxy})
    unit = "inferfleet-proxy.service"

    first = apply_in(box, repo)
    assert first.returncode == 0, first.stdout + first.stderr
    doc = json.loads(first.stdout)
    assert [(d["service"], d["outcome"]) for d in doc["done"]] == [
        ("chat", "deployed"),
        ("proxy", "deployed"),
    ]
    state = box.systemctl_show(unit, "MainPID", "ActiveState", "UnitFileState")
    assert state["ActiveState"] == "active" and state["UnitFileState"] == "enabled"
    installed = box.enter("cat", f"/etc/systemd/system/{unit}")
    # The unit reads the keys from the untracked file; their values never enter it (L-55).
    assert key not in installed and f"EnvironmentFile={keys}" in installed
    # Clients trust the proxy's own CA; a request without the key is refused at the door.
    tls = ssl.create_default_context(cafile=str(frontdoor.ca_root(repo.states["sd"])))
    url = f"https://127.0.0.1:{proxy_port}"
    assert httpx.get(f"{url}/healthz", verify=tls, timeout=10).status_code == 200
    assert httpx.get(f"{url}/chat/health", verify=tls, timeout=10).status_code == 401
    through = httpx.get(
        f"{url}/chat/health", headers={"Authorization": f"Bearer {key}"}, verify=tls, timeout=30
    )
    assert through.status_code == 200, through.text

    # Nothing changed: the proxy is kept, its unit's process too.
    again = apply_in(box, repo)
    assert again.returncode == 0, again.stdout + again.stderr
    assert [d["outcome"] for d in json.loads(again.stdout)["done"]] == ["kept"]
    assert box.systemctl_show(unit, "MainPID") == {"MainPID": state["MainPID"]}

    # A second accepted key (rotation) changes the Caddyfile: a new process serves, and
    # either key passes.
    spare = "sk-" + secrets.token_urlsafe(24)
    keys.write_text(f"INFERFLEET_PROXY_KEY={key}\nSPARE_KEY={spare}\n")
    repo.data["proxy"]["key_names"] = ["INFERFLEET_PROXY_KEY", "SPARE_KEY"]
    repo.commit("proxy: a spare key while rotating")
    second = apply_in(box, repo)
    assert second.returncode == 0, second.stdout + second.stderr
    assert [d["outcome"] for d in json.loads(second.stdout)["done"]] == ["deployed"]
    assert box.systemctl_show(unit, "MainPID") != {"MainPID": state["MainPID"]}
    for accepted in (key, spare):
        answer = httpx.get(
            f"{url}/chat/health",
            headers={"Authorization": f"Bearer {accepted}"},
            verify=tls,
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
