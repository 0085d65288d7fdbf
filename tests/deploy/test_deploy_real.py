"""The real llama-server on the real model, deployed over ssh to two test hosts.

plan -> deploy -> a docs-only commit deploys nothing -> one host's service
changes and only it restarts -> rollback -> retirement. Health is checked
from the root namespace, against each host's own address.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from deploy_hosts import Lab

from inferfleet.artifacts.manifest import declared_files
from inferfleet.artifacts.materialise import materialise
from inferfleet.artifacts.verify import gate
from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.install import llamacpp_build

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.needs_root]


@pytest.fixture(scope="session")
def real_parts() -> dict[str, Any]:
    """The embedded example's runtime and model: built once, verified once (cached)."""
    loaded = load_fleet(embedded_example())
    fleet = loaded.fleet
    source = fleet.runtimes["llama-cpp"].source
    assert source is not None
    llamacpp_build.install(source)
    model = fleet.models["gemma3-270m"]
    materialise("gemma3-270m", model, declared_files(model, loaded.root), lambda _t: None)
    gate("gemma3-270m", model, loaded.root, where="the real parts")
    return {
        "runtimes": {"llama-cpp": fleet.runtimes["llama-cpp"].model_dump(exclude_none=True)},
        "models": {"gemma3-270m": model.model_dump(exclude_none=True, exclude_defaults=True)},
    }


def llm(host: str, lab: Lab, **extra: Any) -> dict[str, Any]:
    return {
        "host": host,
        "runtime": "llama-cpp",
        "model": "gemma3-270m",
        "alias": f"gemma-{host}",
        "bind": lab.hosts[host].address,
        # the test host's address: the tests reach it from the root namespace (L-58)
        "exposure": {"level": "lan", "reason": "the deploy tests reach it from the root namespace"},
        "port": 8080,
        "ctx_per_slot": 2048,
        "parallel": 1,
        "health": {"timeout": "3m"},
        **extra,
    }


def served(lab: Lab, host: str) -> dict[str, Any]:
    base = f"http://{lab.hosts[host].address}:8080"
    assert httpx.get(f"{base}/health", timeout=10).status_code == 200
    model = httpx.get(f"{base}/v1/models", timeout=10).json()["data"][0]
    return {"id": model["id"], "n_ctx": model["meta"]["n_ctx"]}


def test_real_llama_server_deploys_to_two_hosts(cli, fleet, lab: Lab, real_parts) -> None:
    repo = fleet({"chat-h1": llm("h1", lab), "chat-h2": llm("h2", lab)}, **real_parts)
    file = str(repo.fleet_file)

    plan = json.loads(cli("plan", "--file", file, "--json").stdout)
    assert plan["schema"] == "inferfleet.plan/v1"
    assert {(h["host"], i["service"], i["action"]) for h in plan["hosts"] for i in h["items"]} == {
        ("h1", "chat-h1", "deploy"),
        ("h2", "chat-h2", "deploy"),
    }

    first = cli("deploy", "h1", "h2", "-y", "--file", file, "--json")
    assert first.code == 0, first.stderr
    doc = json.loads(first.stdout)
    assert [h["ok"] for h in doc["hosts"]] == [True, True]
    head = repo.head()
    assert served(lab, "h1") == {"id": "gemma-h1", "n_ctx": 2048}
    assert served(lab, "h2") == {"id": "gemma-h2", "n_ctx": 2048}
    pids = {}
    for host in ("h1", "h2"):
        marker = repo.marker(host, f"chat-{host}")
        assert marker is not None and marker["revision"] == head
        assert not Path(repo.states[host]).is_relative_to(repo.checkouts[host])  # L-41
        assert repo.checkout_head(host) == head
        record = repo.record(host, f"chat-{host}")
        assert record is not None
        pids[host] = record["pid"]
        assert Path(psutil.Process(record["pid"]).cmdline()[0]).name == "llama-server"

    # A documentation-only commit plans nothing and restarts nothing (L-40).
    repo.commit("docs", {"README.md": "# our fleet\n\nRunbook.\n", "docs/ops.md": "notes\n"})
    plan = json.loads(cli("plan", "--file", file, "--json").stdout)
    items = [i for h in plan["hosts"] for i in h["items"]]
    assert [i["action"] for i in items] == ["keep", "keep"], items  # with the reasons
    quiet = cli("deploy", "h1", "h2", "-y", "--file", file, "--json")
    assert quiet.code == 0, quiet.stderr
    assert all(h["result"]["done"] == [] for h in json.loads(quiet.stdout)["hosts"])
    assert {h: repo.record(h, f"chat-{h}")["pid"] for h in pids} == pids  # type: ignore[index]
    assert repo.checkout_head("h1") == repo.head()  # pulled all the same

    # One host's service changes: only it restarts, with the new context.
    repo.data["services"]["chat-h2"]["ctx_per_slot"] = 1024
    changed_rev = repo.commit("chat-h2: a smaller window")
    plan = json.loads(cli("plan", "h2", "--file", file, "--json").stdout)
    [item] = plan["hosts"][0]["items"]
    assert item["action"] == "deploy"
    assert item["reasons"] == ["its section of the fleet file changed"]
    second = cli("deploy", "h1", "h2", "-y", "--file", file)
    assert second.code == 0, second.stderr
    assert "chat-h2 (deployed)" in second.stdout
    assert served(lab, "h2") == {"id": "gemma-h2", "n_ctx": 1024}
    assert repo.record("h1", "chat-h1")["pid"] == pids["h1"]  # type: ignore[index]
    assert repo.record("h2", "chat-h2")["pid"] != pids["h2"]  # type: ignore[index]
    assert not psutil.pid_exists(pids["h2"]) or psutil.Process(pids["h2"]).status() == "zombie"

    # Roll back to the revision before: gated the same way, and recorded.
    back = cli("rollback", "chat-h2", "--file", file)
    assert back.code == 0, back.stderr
    assert served(lab, "h2") == {"id": "gemma-h2", "n_ctx": 2048}
    marker = repo.marker("h2", "chat-h2")
    assert marker is not None and marker["revision"] == head
    assert marker["history"][0] == changed_rev
    plan = json.loads(cli("plan", "h2", "--file", file, "--json").stdout)
    assert plan["hosts"][0]["items"][0]["action"] == "deploy"  # HEAD differs from what runs

    # Removing the service from the fleet retires it on its host.
    del repo.data["services"]["chat-h2"]
    repo.commit("retire chat-h2")
    last = cli("deploy", "h2", "-y", "--file", file, "--json")
    assert last.code == 0, last.stderr
    done = json.loads(last.stdout)["hosts"][0]["result"]["done"]
    assert [(d["service"], d["outcome"]) for d in done] == [("chat-h2", "retired")]
    assert repo.marker("h2", "chat-h2") is None and repo.record("h2", "chat-h2") is None
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://{lab.hosts['h2'].address}:8080/health", timeout=3)
    assert served(lab, "h1") == {"id": "gemma-h1", "n_ctx": 2048}
