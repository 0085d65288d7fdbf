"""The gateway rendered from the fleet, its key file gate, and client configs at the front door.

Pure renders of the example fleets and small fleets built here (no server);
the key file gate on real files with real modes; the systemd unit through
the real ``systemd-analyze verify``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT, quadlet_service

from inferfleet.deploy import frontdoor as front
from inferfleet.errors import SpecError, UsageError
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render import clients
from inferfleet.render import gateway as render
from inferfleet.render.bundle import render_fleet
from inferfleet.render.facts import HostFacts, default_facts
from inferfleet.render.frontdoor import KEYS_KIND, with_keys

HOMELAB = ROOT / "examples" / "homelab" / "fleet.yaml"
FIXTURE = ROOT / "tests" / "fixtures" / "fleets" / "gateway.yaml"
FACTS = HostFacts(
    user="ops", home="/home/ops", cache_dir="/home/ops/.cache/inferfleet", fleet_dir="/srv/fleet"
)


def fixture_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(FIXTURE.read_text())
    return data


def loaded_from(tmp_path: Path, data: dict[str, Any]) -> Any:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_fleet(path)


def test_homelab_config_fronts_every_llm_service_at_its_real_address() -> None:
    fleet = load_fleet(HOMELAB).fleet
    config = render.config(fleet)
    entries = {m["model_name"]: m for m in config["model_list"]}
    assert list(entries) == ["qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-coder-30b"]
    # chat is on atlas with the gateway, on loopback; vision binds nova's LAN address
    # (exposure lan); coder binds 0.0.0.0 on forge: reached at forge's address (L-58).
    apis = {alias: e["litellm_params"]["api_base"] for alias, e in entries.items()}
    assert apis == {
        "qwen3-30b-a3b": "http://127.0.0.1:8000/v1",
        "qwen3.5-35b-a3b": "http://192.168.1.21:8080/v1",
        "qwen3-coder-30b": "http://192.168.1.22:8080/v1",
    }
    coder = entries["qwen3-coder-30b"]
    # The client contract: the per-slot window (L-25) and max_tokens inside it (L-26).
    assert coder["model_info"]["context_window"] == 32768
    assert coder["model_info"]["max_tokens"] == 8192
    assert coder["model_info"]["max_input_tokens"] + coder["model_info"]["max_tokens"] <= 32768
    # gateway.timeout: 20m, for every request and for a stream's next chunk.
    assert coder["litellm_params"]["timeout"] == coder["litellm_params"]["stream_timeout"] == 1200
    assert config["general_settings"] == {"master_key": "os.environ/LITELLM_MASTER_KEY"}
    assert config["litellm_settings"]["num_retries"] == 0


def test_per_service_timeouts_and_a_chosen_subset(tmp_path: Path) -> None:
    data = fixture_data()
    data["gateway"]["services"] = ["gemma-wide"]
    data["gateway"]["timeouts"] = {"gemma-wide": "45m"}
    fleet = loaded_from(tmp_path, data).fleet
    (entry,) = render.config(fleet)["model_list"]
    assert entry["model_name"] == "gemma3-270m-wide"
    assert entry["litellm_params"]["timeout"] == 2700.0
    # Client configs: the fronted alias through the gateway, the other one direct.
    by_id = {p["id"]: p for p in clients.providers(fleet)["providers"]}
    assert by_id["gemma3-270m-wide"]["base_url"] == "http://127.0.0.1:4000/v1"
    assert by_id["gemma3-270m"]["base_url"] == "http://127.0.0.1:8080/v1"
    env = clients.openwebui(fleet)
    assert env["OPENAI_API_BASE_URLS"] == "http://127.0.0.1:4000/v1;http://127.0.0.1:8080/v1"
    assert env["OPENAI_API_KEYS"] == f"{clients.OPENWEBUI_KEY_PLACEHOLDER};none"


def test_without_a_gateway_clients_go_direct(tmp_path: Path) -> None:
    data = fixture_data()
    del data["gateway"]
    fleet = loaded_from(tmp_path, data).fleet
    assert {m["litellm_params"]["api_base"] for m in clients.litellm(fleet)["model_list"]} == {
        "http://127.0.0.1:8080/v1",
        "http://127.0.0.1:8081/v1",
    }
    env = clients.openwebui(fleet)
    assert env == {
        "OPENAI_API_BASE_URLS": "http://127.0.0.1:8080/v1;http://127.0.0.1:8081/v1",
        "OPENAI_API_KEYS": "none;none",
    }
    # Completion-only endpoints are no chat providers for OpenCode.
    assert clients.opencode(fleet)["provider"] == {}
    paths = {a.path for a in render_fleet(loaded_from(tmp_path, data))}
    assert not [p for p in paths if "/gateway/" in p]


def test_rendered_gateway_files_name_the_key_file_never_a_key(tmp_path: Path) -> None:
    data = fixture_data()
    data["gateway"]["backend"] = "systemd"
    loaded = loaded_from(tmp_path, data)
    artifacts = {a.path: a for a in render_fleet(loaded)}
    config = artifacts["hosts/local/gateway/litellm.yaml"]
    unit = artifacts["hosts/local/gateway/inferfleet-gateway.service"]
    assert config.install == "/etc/inferfleet/gateway/litellm.yaml"
    assert unit.install == "/etc/systemd/system/inferfleet-gateway.service"
    assert "EnvironmentFile=" in unit.content and "LITELLM_MASTER_KEY" not in unit.content
    assert "os.environ/LITELLM_MASTER_KEY" in config.content
    assert "sk-" not in "".join(a.content for a in artifacts.values())


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd; scripts/test)")
    data = fixture_data()
    data["gateway"]["backend"] = "systemd"
    fleet = loaded_from(tmp_path, data).fleet
    launch = render.gateway_launch(fleet, FACTS)
    root = tmp_path / "root"
    library = root / "usr/lib/systemd/system"
    shutil.copytree("/usr/lib/systemd/system", library, symlinks=True)
    python = root / launch.argv[0].lstrip("/")
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    unit = launch.unit_file
    assert unit is not None
    path = root / unit.path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(unit.content)
    result = subprocess.run(
        [analyze, f"--root={root}", "verify", "--man=no", unit.path],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and (result.stdout + result.stderr).strip() == "", unit.content
    # keys_env: gateway.env, relative to the fleet file's folder on the host.
    assert "EnvironmentFile=/srv/fleet/gateway.env" in unit.content
    assert "ExecStart=/home/ops/.cache/inferfleet/runtimes/litellm/venv-litellm-proxy-" in (
        unit.content
    )


def test_a_launch_digest_moves_with_config_and_keys_only() -> None:
    fleet = load_fleet(HOMELAB).fleet
    facts = default_facts(fleet.hosts["atlas"])

    def spec(fleet: Fleet, key: str) -> str:
        return with_keys(render.gateway_launch(fleet, facts), {"K": key}, facts).spec

    assert spec(fleet, "a") == spec(fleet, "a")  # byte-stable
    assert spec(fleet, "a") != spec(fleet, "b")  # a changed key restarts it
    longer = fleet.model_copy(
        update={"gateway": fleet.gateway.model_copy(update={"timeout": 1800.0})}
    )
    assert spec(longer, "a") != spec(fleet, "a")


def test_a_unit_gets_its_keys_digest_as_a_file_never_the_keys() -> None:
    """A unit reads its key file itself: the keys' digest is a file installed beside its
    config, so a changed key changes a file and the unit is restarted (L-55: never a key)."""
    fleet = load_fleet(HOMELAB).fleet
    facts = default_facts(fleet.hosts["atlas"])
    units = fleet.model_copy(
        update={"gateway": fleet.gateway.model_copy(update={"backend": "systemd"})}
    )
    launch = render.gateway_launch(units, facts)
    one = with_keys(launch, {"LITELLM_MASTER_KEY": "sk-first-0123456789"}, facts)
    two = with_keys(launch, {"LITELLM_MASTER_KEY": "sk-second-0123456789"}, facts)
    first, second = one.file(KEYS_KIND), two.file(KEYS_KIND)
    assert first.path == second.path == "/etc/inferfleet/gateway/keys.sha256"
    assert first.content != second.content
    assert all("sk-first" not in f.content for f in one.files)
    assert one.unit_file is not None and one.unit_file.content == two.unit_file.content
    # A process gets the values in its environment instead; no digest file for it.
    process = with_keys(render.gateway_launch(fleet, facts), {"K": "v"}, facts)
    assert [f.kind for f in process.files] == ["config"]
    assert process.process_env({"PATH": "/bin", "HF_TOKEN": "x"})["K"] == "v"
    assert "HF_TOKEN" not in process.process_env({"HF_TOKEN": "x"})


@pytest.mark.parametrize(
    ("content", "mode", "expect"),
    [
        (None, 0o600, "cannot read key file"),
        ("LITELLM_MASTER_KEY=sk-0123456789abcdef\n", 0o644, "can be read by other users"),
        ("OTHER=1\n", 0o600, "no usable LITELLM_MASTER_KEY"),
        ("LITELLM_MASTER_KEY=0123456789abcdef0\n", 0o600, "no usable LITELLM_MASTER_KEY"),
        ("LITELLM_MASTER_KEY=sk-short\n", 0o600, "no usable LITELLM_MASTER_KEY"),
    ],
)
def test_the_key_file_gate(tmp_path: Path, content: str | None, mode: int, expect: str) -> None:
    path = tmp_path / "gateway.env"
    if content is not None:
        path.write_text(content)
        path.chmod(mode)
    with pytest.raises(front.GatewayKeysError) as caught:
        front.read_keys(path)
    assert expect in caught.value.message
    assert caught.value.hint


def test_a_key_file_that_is_no_text_or_no_file_is_refused_without_hanging(tmp_path: Path) -> None:
    binary = tmp_path / "binary.env"
    binary.write_bytes(b"LITELLM_MASTER_KEY=sk-\xff\xfe0123456789\n")
    binary.chmod(0o600)
    fifo = tmp_path / "fifo.env"
    os.mkfifo(fifo, 0o600)  # no writer: a plain open would wait forever
    for path, expect in ((binary, "is not UTF-8 text"), (fifo, "is a FIFO")):
        with pytest.raises(front.GatewayKeysError) as caught:
            front.read_keys(path)
        assert expect in caught.value.message and str(path) in caught.value.message
        assert caught.value.where.startswith("gateway.keys_env") and caught.value.hint


def test_a_bad_key_file_stops_the_deploy_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing half-written: no venv, no config, no record, no process when the keys are wrong."""
    data = fixture_data()
    keys = tmp_path / "gateway.env"
    keys.write_text("LITELLM_MASTER_KEY=sk-0123456789abcdef\n")
    keys.chmod(0o644)
    data["gateway"]["keys_env"] = str(keys)
    fleet = loaded_from(tmp_path, data).fleet
    cache = tmp_path / "cache"
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(cache))
    facts = HostFacts(user="ops", home=str(tmp_path / "home"), cache_dir=str(cache))
    state = tmp_path / "state"
    with pytest.raises(front.GatewayKeysError, match="can be read by other users"):
        front.deploy(fleet, facts, state, "gateway")
    assert not cache.exists() and not state.exists() and not (tmp_path / "home").exists()


def test_fleets_the_gateway_cannot_front_are_refused(tmp_path: Path) -> None:
    data = fixture_data()
    data["services"]["gemma-wide"]["alias"] = "gemma3-270m"
    with pytest.raises(UsageError, match="both serve the alias"):
        render.config(loaded_from(tmp_path, data).fleet)
    data = fixture_data()
    data["services"]["gateway"] = data["services"].pop("gemma-wide")
    data["gateway"]["timeouts"] = {}
    with pytest.raises(UsageError, match="the name of the gateway's unit"):
        render.config(loaded_from(tmp_path, data).fleet)


def test_opencode_reads_the_front_doors_key_from_the_environment() -> None:
    fleet = load_fleet(HOMELAB).fleet
    options = json.loads(clients.opencode_json(fleet))["provider"]["inferfleet"]["options"]
    # homelab's auth proxy fronts its gateway: the proxy's address and key.
    assert options == {"baseURL": "https://ai.home.arpa/v1", "apiKey": "{env:INFERFLEET_PROXY_KEY}"}
    # Without the proxy, the gateway's.
    bare = fleet.model_copy(update={"proxy": None})
    options = json.loads(clients.opencode_json(bare))["provider"]["inferfleet"]["options"]
    assert options == {
        "baseURL": "http://127.0.0.1:4000/v1",
        "apiKey": "{env:INFERFLEET_GATEWAY_KEY}",
    }
    env = clients.openwebui(fleet)
    assert env["OPENAI_API_BASE_URLS"].split(";")[0] == "https://ai.home.arpa/v1"
    assert env["OPENAI_API_KEYS"].split(";")[0] == clients.OPENWEBUI_PROXY_PLACEHOLDER


IMAGE = "ghcr.io/berriai/litellm@sha256:" + "ab" * 32


def test_quadlet_gateway_passes_the_real_quadlet_generator(tmp_path: Path) -> None:
    """The .container file through Podman's own generator (-dryrun exits 1 on a bad key)."""
    data = fixture_data()
    data["gateway"].update(backend="quadlet", scope="user")
    data["gateway"]["engine"]["image"] = IMAGE
    fleet = loaded_from(tmp_path, data).fleet
    launch = render.gateway_launch(fleet, FACTS)
    unit = launch.unit_file
    assert unit is not None and unit.kind == "quadlet"
    assert unit.path == "/home/ops/.config/containers/systemd/inferfleet-gateway.container"
    service = quadlet_service(tmp_path, "inferfleet-gateway.container", unit.content, user=True)
    # The image by digest on the host's network (L-57: only there are its backends'
    # loopback addresses its host's), config read-only, keys from the env file.
    assert IMAGE in service and "--network host" in service
    # Labelled as the gateway's: the gate and status accept its processes as its own (L-33).
    assert "--label inferfleet.service=gateway" in service
    assert f"{launch.file('config').path}:/etc/litellm/config.yaml:ro" in service
    assert "--env-file /srv/fleet/gateway.env" in service
    assert "--config /etc/litellm/config.yaml --host 127.0.0.1 --port 4000" in service
    assert "LITELLM_MASTER_KEY" not in unit.content


@pytest.mark.parametrize(
    ("gateway", "expect"),
    [
        ({"backend": "quadlet"}, "give engine.image"),
        ({"engine": {"image": IMAGE}}, "only run by backend quadlet"),
        ({"backend": "quadlet", "engine": {"image": "ghcr.io/berriai/litellm:latest"}}, "digest"),
    ],
)
def test_quadlet_needs_a_pinned_image_and_only_quadlet_runs_one(
    tmp_path: Path, gateway: dict[str, Any], expect: str
) -> None:
    data = fixture_data()
    data["gateway"].update(gateway)
    with pytest.raises(SpecError) as caught:
        loaded_from(tmp_path, data)
    assert expect in caught.value.render()


def test_the_proxy_root_a_host_reports_is_its_pem_or_nothing(tmp_path: Path) -> None:
    """What ``apply --facts`` sends status on another machine: the CA root when the proxy runs
    there under tls internal and Caddy wrote it; nothing otherwise, and a root that cannot be
    read (a folder, too large) never fails the host's whole report."""
    data = fixture_data()
    keys = tmp_path / "proxy.env"
    keys.write_text("INFERFLEET_PROXY_KEY=sk-" + "k" * 32 + "\n")
    data["proxy"] = {
        "host": data["gateway"]["host"],
        "bind": "127.0.0.1",
        "exposure": {"level": "lan", "reason": "the test"},
        "keys_env": str(keys),
    }
    fleet = loaded_from(tmp_path, data).fleet
    host = data["gateway"]["host"]
    state = tmp_path / "state"
    assert front.ca_root_text(fleet, host, state) is None  # Caddy has not written it yet
    root = front.ca_root(state)
    root.parent.mkdir(parents=True)
    pem = "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n"
    root.write_text(pem)
    assert front.ca_root_text(fleet, host, state) == pem
    assert front.ca_root_text(fleet, "elsewhere", state) is None  # not the proxy's host
    root.write_text(pem * 1000)  # far larger than a certificate
    assert front.ca_root_text(fleet, host, state) is None
    root.unlink()
    root.mkdir()
    assert front.ca_root_text(fleet, host, state) is None
