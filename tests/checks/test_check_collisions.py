"""Collisions between services, through ``inferfleet check`` (and ``validate`` for ports).

Each rule: an incident fleet that trips it and the fixed fleet that passes,
with the message's names and the fix asserted. Port clashes are refused when
the fleet file loads (a schema error, exit 2), so they are tested there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from check_helpers import Patch, build

COLLISION_RULES = {"exclusive-engines-share-device", "alias-served-twice", "model-dir-shared"}
S = "services"
SERVE2 = {
    "host": "gpu", "runtime": "vllm", "model": "hf", "port": 8001, "ctx_per_slot": 8192,
    "devices": ["g1"], "backend": "quadlet", "gpu_memory_utilization": 0.4,
}  # fmt: skip
HUB = {"hub": "example/models", "revision": "0" * 40}


def run(cli: Any, tmp_path: Path, patch: Patch) -> tuple[int, list[dict[str, Any]], Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(build(patch), sort_keys=False))
    result = cli("check", str(path), "--json")
    assert result.code in (0, 1), result.stderr
    return result.code, json.loads(result.stdout)["findings"], path


def only(findings: list[dict[str, Any]], rule: str) -> list[dict[str, Any]]:
    return [f for f in findings if f["rule"] == rule]


def line_of(path: Path, finding: dict[str, Any]) -> str:
    return str(path.read_text().splitlines()[finding["line"] - 1].strip())


# ---------------------------------------------------------------- engines


def test_two_engines_on_one_device(cli: Any, tmp_path: Path) -> None:
    """L-32: a second vLLM on the device a vLLM already claimed."""
    code, findings, path = run(cli, tmp_path / "a", {f"{S}.serve2": SERVE2})
    assert code == 1
    (hit,) = only(findings, "exclusive-engines-share-device")
    assert hit["service"] == "serve2" and hit["field"] == "services.serve2.devices"
    assert line_of(path, hit) == "devices:"
    assert (
        "device 'g1' of host 'gpu' runs vllm service 'serve' and vllm service 'serve2'"
        in hit["message"]
    )
    assert "devices of its own" in hit["hint"]

    moved = {**SERVE2, "devices": ["g0"]}
    fixed = {f"{S}.serve2": moved, f"{S}.chat.devices": ["g1"]}
    code, findings, _ = run(cli, tmp_path / "b", fixed)
    assert only(findings, "exclusive-engines-share-device") == [] and code == 0


def test_an_engine_without_devices_takes_the_first_gpu(cli: Any, tmp_path: Path) -> None:
    """No devices: vLLM runs on device 0, where another engine already is."""
    sglang = {"kind": "sglang", "image": "docker.io/lmsysorg/sglang@sha256:" + "b" * 64}
    first = {**SERVE2, "runtime": "sg", "devices": ["g0"]}
    later = {**SERVE2, "port": 8002, "devices": []}
    patch = {"runtimes.sg": sglang, f"{S}.serve2": first, f"{S}.serve3": later,
             f"{S}.chat.devices": []}  # fmt: skip
    code, findings, _ = run(cli, tmp_path / "a", patch)
    (hit,) = only(findings, "exclusive-engines-share-device")
    assert (
        "device 'g0' of host 'gpu' runs sglang service 'serve2' and vllm service 'serve3'"
        in (hit["message"])
    )
    assert "the host's first GPU (no devices given)" in hit["message"]


# ---------------------------------------------------------------- aliases


def test_one_alias_two_contracts(cli: Any, tmp_path: Path) -> None:
    """L-26: clients pick an endpoint by model id; one id with two windows is a coin toss."""
    patch = {f"{S}.serve.alias": "chat"}
    code, findings, path = run(cli, tmp_path / "a", patch)
    assert code == 1
    (hit,) = only(findings, "alias-served-twice")
    assert hit["service"] == "serve" and line_of(path, hit) == "alias: chat"
    assert (
        "services 'chat' and 'serve' both serve the model id 'chat', with a different "
        "model: client configs list endpoints by that id" in hit["message"]
    )
    assert "give service 'serve' its own alias (services.serve.alias)" in hit["hint"]

    code, findings, _ = run(cli, tmp_path / "b", {f"{S}.serve.alias": "big"})
    assert only(findings, "alias-served-twice") == [] and code == 0


def test_identical_replicas_may_share_an_alias(cli: Any, tmp_path: Path) -> None:
    """Two replicas of one contract on two devices are a pool a proxy balances."""
    replica = dict(build()[S]["chat"], port=8081, devices=["g1"], alias="chat")
    patch = {f"{S}.replica": replica, f"{S}.serve": None}
    code, findings, _ = run(cli, tmp_path, patch)
    assert only(findings, "alias-served-twice") == [] and code == 0
    replica["ctx_per_slot"] = 4096
    code, findings, _ = run(cli, tmp_path / "b", patch)
    (hit,) = only(findings, "alias-served-twice")
    assert "with a different ctx_per_slot:" in hit["message"]


# ---------------------------------------------------------------- model folders


def hub_model(name: str, size: int, folder: str | None) -> dict[str, Any]:
    model: dict[str, Any] = {"source": HUB, "files": [{"path": name, "size": size}]}
    if folder is not None:
        model["dir"] = folder
    return model


def test_two_models_fetched_into_one_folder(cli: Any, tmp_path: Path) -> None:
    """L-09: fetch and verify work on the declared files; two sets in one folder
    overwrite each other."""
    patch: Patch = {
        "models.m": hub_model("model.gguf", 100, "~/models/shared"),
        "models.d": hub_model("model.gguf", 200, "~/models/shared/"),
        f"{S}.chat.speculative": {"types": ["draft-simple"], "draft_model": "d"},
    }
    code, findings, path = run(cli, tmp_path / "a", patch)
    assert code == 1
    (hit,) = only(findings, "model-dir-shared")
    assert hit["field"] == "models.d.dir" and line_of(path, hit) == "dir: ~/models/shared/"
    assert (
        "models 'm' (service 'chat') and 'd' (service 'chat') are both fetched into "
        "~/models/shared on host 'gpu', and both declare model.gguf with different sizes "
        "or hashes" in hit["message"]
    )
    assert "give model 'd' its own dir" in hit["hint"]

    patch["models.d"] = hub_model("model.gguf", 200, "~/models/draft")
    code, findings, _ = run(cli, tmp_path / "b", patch)
    assert only(findings, "model-dir-shared") == [] and code == 0


def test_a_folder_shared_across_services_and_the_default_folder(cli: Any, tmp_path: Path) -> None:
    """Another service's model fetched into the same folder trips it; the same files
    declared twice, or another host, do not."""
    other = dict(build()[S]["chat"], model="d", port=8081, devices=["g1"], alias="other")
    patch: Patch = {
        "models.m": hub_model("a.gguf", 100, "/srv/models"),
        "models.d": hub_model("b.gguf", 100, "/srv/models"),
        f"{S}.other": other,
    }
    code, findings, _ = run(cli, tmp_path / "a", patch)
    (hit,) = only(findings, "model-dir-shared")
    assert "and their declared files differ" in hit["message"]
    assert "(service 'other')" in hit["message"]

    patch["models.d"] = hub_model("a.gguf", 100, "/srv/models")  # the same files
    assert only(run(cli, tmp_path / "b", patch)[1], "model-dir-shared") == []
    patch["models.d"] = hub_model("b.gguf", 100, "/srv/models")
    other["host"], other["devices"] = "apu", ["igpu"]  # fetched on another host
    assert only(run(cli, tmp_path / "c", patch)[1], "model-dir-shared") == []


# ---------------------------------------------------------------- ports


@pytest.mark.parametrize(
    ("first", "second", "clash"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("0.0.0.0", "10.0.0.5", True),  # the wildcard takes every IPv4 address
        ("::", "127.0.0.1", True),  # dual-stack: :: takes IPv4 too
        ("::1", "0:0:0:0:0:0:0:1", True),  # one address, two spellings
        ("::ffff:127.0.0.1", "127.0.0.1", True),  # IPv4-mapped
        ("0.0.0.0", "::1", False),  # IPv4 wildcard, IPv6 loopback: two sockets
        ("127.0.0.1", "10.0.0.5", False),
    ],
)
def test_port_clash_is_refused_at_load(
    cli: Any, tmp_path: Path, first: str, second: str, clash: bool
) -> None:
    patch = {f"{S}.chat.bind": first, f"{S}.serve.bind": second, f"{S}.serve.port": 8080}
    lan = {"level": "lan", "reason": "clients on the lab network call it"}  # binds beyond loopback
    patch |= {f"{S}.chat.exposure": lan, f"{S}.serve.exposure": lan}
    patch |= {f"{S}.{n}.secrets_env": f"/etc/inferfleet/{n}.env" for n in ("chat", "serve")}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(build(patch), sort_keys=False))
    result = cli("check", str(path))
    if clash:
        assert result.code == 2
        assert "port 8080 on host 'gpu' is already used by service 'chat'" in result.stderr
        assert "give each service on a host its own port" in result.stderr
    else:
        assert result.code == 0, result.stdout + result.stderr
