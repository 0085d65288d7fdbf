"""L-57 in the rendered Prometheus config: targets are what Prometheus reaches from where it runs.

The incident: a container on a bridged network reached a host-network server at
the host's LAN address and got nothing (only published ports are forwarded into
a container network). A Prometheus run in such a container on host ``gpu``
(10.0.0.5) scrapes ``gpu``'s servers only at ``host.containers.internal``; the
config rendered before ``monitoring.prometheus`` existed named 10.0.0.5 (as
another host reaches them). Every config is also checked by the real promtool.

Mutations killed (each applied and seen failing):
- ``dial_address`` ignoring ``bridged`` (no host gateway name): the container
  case renders 10.0.0.5:8080 and 127.0.0.1:8081, the incident;
- ``scrape_target`` ignoring ``monitoring.prometheus`` (always as the fleet
  reaches it): the container case and the host-network case (127.0.0.1 for a
  wildcard bind on its own host) both fail;
- ``dial_address`` answering the host gateway name from another host: ``far``
  on host ``apu`` is no longer 10.0.0.6.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from render_helpers import run

from inferfleet.errors import SpecError
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render import prometheus
from inferfleet.render.endpoints import HOST_GATEWAY

LAN = {"level": "lan", "reason": "Prometheus scrapes it"}


def fleet_data(monitoring: dict[str, Any] | None) -> dict[str, Any]:
    def llm(host: str, port: int, bind: str = "127.0.0.1") -> dict[str, Any]:
        service = {
            "host": host,
            "runtime": "lcpp",
            "model": "m",
            "port": port,
            "bind": bind,
            "ctx_per_slot": 4096,
        }
        return service if bind == "127.0.0.1" else service | {"exposure": LAN}

    data: dict[str, Any] = {
        "version": 1,
        "hosts": {"gpu": {"address": "10.0.0.5"}, "apu": {"address": "10.0.0.6"}},
        "runtimes": {"lcpp": {"kind": "llama.cpp", "binary": "/opt/llama/llama-server"}},
        "models": {"m": {"source": {"path": "/srv/m"}, "files": [{"path": "m.gguf", "size": 1}]}},
        "services": {
            "wide": llm("gpu", 8080, "0.0.0.0"),  # every address of gpu
            "near": llm("gpu", 8081),  # gpu's loopback only
            "lan": llm("gpu", 8082, "10.0.0.5"),  # gpu's LAN address
            "far": llm("apu", 8080, "0.0.0.0"),  # another host
        },
    }
    if monitoring is not None:
        data["monitoring"] = monitoring
    return data


def targets(tmp_path: Path, monitoring: dict[str, Any] | None) -> tuple[dict[str, str], str]:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_data(monitoring), sort_keys=False))
    config = prometheus.scrape_config(load_fleet(path).fleet)
    jobs = yaml.safe_load(config)["scrape_configs"]
    found = {j["job_name"].removeprefix("inferfleet-"): j["static_configs"][0] for j in jobs}
    return {name: static["targets"][0] for name, static in found.items()}, config


def promtool_accepts(promtool: str, folder: Path, config: str) -> None:
    (folder / "rules").mkdir(parents=True, exist_ok=True)
    (folder / "rules" / prometheus.RULES_FILE).write_text("groups: []\n")
    (folder / "prometheus.yml").write_text(config)
    # Services beyond loopback require their key (L-58): Prometheus reads each from a file
    # beside its config, which promtool wants to exist.
    for job in yaml.safe_load(config)["scrape_configs"]:
        credentials = job.get("authorization", {}).get("credentials_file")
        if credentials:
            (folder / credentials).parent.mkdir(parents=True, exist_ok=True)
            (folder / credentials).write_text("a-scrape-key\n")
    checked = run([promtool, "check", "config", str(folder / "prometheus.yml")])
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_L57_prometheus_in_a_bridged_container_scrapes_its_host_at_the_gateway_name(
    tmp_path: Path, promtool: str
) -> None:
    site = {"prometheus": {"host": "gpu", "network": "container"}}
    found, config = targets(tmp_path, site)
    assert found == {
        "wide": f"{HOST_GATEWAY}:8080",  # not 10.0.0.5:8080, the incident
        "near": f"{HOST_GATEWAY}:8081",  # unreachable all the same: check refuses it
        "lan": f"{HOST_GATEWAY}:8082",
        "far": "10.0.0.6:8080",  # another host is reached at its address
    }
    assert "10.0.0.5" not in config and "127.0.0.1" not in config
    promtool_accepts(promtool, tmp_path / "prom", config)


def test_prometheus_on_the_hosts_network_reaches_its_own_host_on_loopback(
    tmp_path: Path, promtool: str
) -> None:
    found, config = targets(tmp_path, {"prometheus": {"host": "gpu"}})  # network: host
    assert found == {
        "wide": "127.0.0.1:8080",
        "near": "127.0.0.1:8081",
        "lan": "10.0.0.5:8082",
        "far": "10.0.0.6:8080",
    }
    promtool_accepts(promtool, tmp_path / "prom", config)


def test_without_a_site_targets_are_what_another_host_reaches(tmp_path: Path) -> None:
    found, _ = targets(tmp_path, None)
    assert found == {
        "wide": "10.0.0.5:8080",
        "near": "127.0.0.1:8081",
        "lan": "10.0.0.5:8082",
        "far": "10.0.0.6:8080",
    }


@pytest.mark.parametrize(
    ("site", "expect", "on_line"),
    [
        ({"prometheus": {"host": "nas"}}, "Prometheus runs on host 'nas', which is not in hosts",
         "nas"),
        ({"prometheus": {"host": "gpu", "network": "bridge"}}, "'host' or 'container'", "bridge"),
        ({"prometheus": {"host": "gpu", "port": 9090}}, "port", "port"),
    ],
)  # fmt: skip
def test_a_bad_site_is_refused_at_its_line(
    tmp_path: Path, site: dict[str, Any], expect: str, on_line: str
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_data(site), sort_keys=False))
    with pytest.raises(SpecError) as caught:
        load_fleet(path)
    text = caught.value.render()
    assert expect in text, text
    line = int(re.search(r"fleet\.yaml:(\d+):", text).group(1))  # type: ignore[union-attr]
    assert on_line in path.read_text().splitlines()[line - 1]
