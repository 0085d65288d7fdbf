"""L-58: what every runtime adapter and unit renderer binds follows the exposure, from one place.

A ``loopback`` service renders a loopback bind and a ``lan`` one its declared
address, in the argv of llama.cpp, vLLM and SGLang, in a Quadlet
``PublishPort`` and a systemd unit's ``podman run --publish`` (IPv6 in
brackets, as podman reads it, checked by the real Quadlet generator). A bind
the exposure does not allow is refused by the one launch pipeline, so
``render --no-check`` and ``show`` refuse it too, writing nothing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from check_helpers import DIGEST, Patch, build
from helpers import quadlet_generator

from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.render.exposure import ExposureError, publish_spec
from inferfleet.render.facts import facts_for
from inferfleet.render.pipeline import ServiceLaunch, service_launch
from inferfleet.runtimes.flags import parse_args

S = "services"
LAN = {"level": "lan", "reason": "the lab's clients call it over the LAN"}
RUNTIMES = {
    "vbin": {"kind": "vllm", "binary": "/opt/vllm/bin/vllm"},
    "sgbin": {"kind": "sglang", "binary": "/opt/sglang/bin/sglang"},
    "sgimg": {"kind": "sglang", "image": "docker.io/lmsysorg/sglang" + DIGEST},
}
# name -> service fields (each on its own device and port of host "gpu", next to BASE's)
SERVED: dict[str, dict[str, Any]] = {
    "lcpp-process": {"runtime": "lcpp", "model": "m", "backend": "process"},
    "lcpp-systemd": {"runtime": "lcpp", "model": "m", "backend": "systemd"},
    "vllm-systemd": {"runtime": "vbin", "model": "hf", "backend": "systemd"},
    "sglang-systemd": {"runtime": "sgbin", "model": "hf", "backend": "systemd"},
    "sglang-hostnet": {"runtime": "sgimg", "model": "hf", "backend": "quadlet",
                       "container": {"network": "host"}},
}  # fmt: skip
# name -> (fields, the unit kind that publishes its port)
PUBLISHED: dict[str, tuple[dict[str, Any], str]] = {
    "vllm-quadlet": ({"runtime": "vllm", "model": "hf", "backend": "quadlet"}, "quadlet"),
    "vllm-podman-run": ({"runtime": "vllm", "model": "hf", "backend": "systemd"}, "systemd"),
    "web-quadlet": ({"kind": "container", "image": "docker.io/example/web" + DIGEST,
                     "backend": "quadlet", "container": {"port": 8080}}, "quadlet"),
    "web-podman-run": ({"kind": "container", "image": "docker.io/example/web" + DIGEST,
                        "backend": "systemd", "container": {"port": 8080}}, "systemd"),
}  # fmt: skip
PORT = 9100


def fleet_with(tmp_path: Path, name: str, fields: dict[str, Any], extra: Patch) -> LoadedFleet:
    patch: Patch = {f"runtimes.{k}": v for k, v in RUNTIMES.items()}
    service = {"host": "gpu", "port": PORT, **fields}
    if service.get("kind") != "container":
        service |= {"ctx_per_slot": 4096}
    patch[f"{S}.{name}"] = service | extra
    data = build(patch)
    for other in data[S].values():  # one service per device: no engine shares a GPU here
        other.pop("devices", None)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_fleet(path)


def launch_of(loaded: LoadedFleet, name: str) -> ServiceLaunch:
    facts = facts_for(loaded.fleet)["gpu"]
    return service_launch(loaded.fleet, loaded.root, name, facts)


def host_flag(argv: list[str]) -> str:
    (value,) = [a.value for a in parse_args(argv) if a.flag == "--host"]
    assert value is not None
    return value


EXPOSURES = {
    "loopback": ({}, "127.0.0.1"),
    "loopback-alias": ({"bind": "127.0.0.2"}, "127.0.0.2"),
    "lan": ({"bind": "10.0.0.5", "exposure": LAN}, "10.0.0.5"),
    "lan-wildcard": ({"bind": "0.0.0.0", "exposure": LAN}, "0.0.0.0"),
}


@pytest.mark.parametrize("exposure", sorted(EXPOSURES))
@pytest.mark.parametrize("name", sorted(SERVED) + sorted(PUBLISHED))
def test_every_adapter_and_unit_binds_what_the_exposure_allows(
    tmp_path: Path, name: str, exposure: str
) -> None:
    """On the host's network the adapter's --host is the bind; a bridged container publishes
    its port on the bind only (and listens on every address of its own namespace)."""
    extra, address = EXPOSURES[exposure]
    fields, kind = PUBLISHED.get(name) or (SERVED[name], None)
    launch = launch_of(fleet_with(tmp_path, name, fields, extra), name)
    unit = launch.unit_file
    if kind is None:
        assert host_flag(launch.argv) == address
        if unit is not None and unit.kind == "quadlet":
            assert "Network=host" in unit.content.splitlines()
        return
    assert unit is not None and unit.kind == kind
    inside = 8080 if "web" in name else PORT
    if kind == "quadlet":
        assert f"PublishPort={address}:{PORT}:{inside}" in unit.content.splitlines()
    else:
        assert f" --publish {address}:{PORT}:{inside} " in unit.content
    if "vllm" in name:
        assert host_flag(launch.argv) == "0.0.0.0"


def test_ipv6_binds_are_bracketed_for_podman_and_quadlet_passes_them(
    tmp_path: Path, quadlet_binary: str
) -> None:
    assert publish_spec("::1", 8000, 80) == "[::1]:8000:80"
    assert publish_spec("10.0.0.5", 8000, 80) == "10.0.0.5:8000:80"
    loaded = fleet_with(tmp_path, "v6", PUBLISHED["vllm-quadlet"][0], {"bind": "::1"})
    unit = launch_of(loaded, "v6").unit_file
    assert unit is not None and "PublishPort=[::1]:9100:9100" in unit.content.splitlines()
    folder = tmp_path / "units"
    folder.mkdir()
    (folder / "inferfleet-v6.container").write_text(unit.content)
    result = subprocess.run(
        [quadlet_binary, "-dryrun"],
        env={**os.environ, "QUADLET_UNIT_DIRS": str(folder)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "--publish [::1]:9100:9100" in result.stdout or "-p [::1]:9100:9100" in result.stdout


@pytest.fixture
def quadlet_binary() -> str:
    return quadlet_generator()


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ({"bind": "0.0.0.0"}, "services.{name}.bind", "binds 0.0.0.0 on host 'gpu'"),
        ({"bind": "10.0.0.5", "exposure": "lan"}, "services.{name}.exposure", "without a stated"),
        ({"bind": "10.0.0.5", "exposure": "public"}, "services.{name}.exposure", "no auth proxy"),
    ],
)
@pytest.mark.parametrize("name", ["lcpp-systemd", "vllm-quadlet", "web-podman-run"])
def test_the_launch_refuses_what_the_policy_refuses(
    tmp_path: Path, name: str, extra: Patch, field: str, words: str
) -> None:
    fields = SERVED.get(name) or PUBLISHED[name][0]
    loaded = fleet_with(tmp_path, name, fields, extra)
    with pytest.raises(ExposureError) as caught:
        launch_of(loaded, name)
    error = caught.value
    assert error.where == field.format(name=name)
    assert f"service {name!r}" in error.message and words in error.message
    assert "(L-58)" in error.message and error.hint


def test_a_listener_flag_in_extra_args_is_refused_on_the_hosts_network(tmp_path: Path) -> None:
    fields = {**SERVED["vllm-systemd"], "extra_args": ["--data-parallel-address", "0.0.0.0"]}
    loaded = fleet_with(tmp_path, "dp", fields, {})
    with pytest.raises(ExposureError, match="--data-parallel-address") as caught:
        launch_of(loaded, "dp")
    assert caught.value.where == "services.dp.extra_args"
    opened = fleet_with(tmp_path, "dp", fields, {"exposure": LAN})
    assert "--data-parallel-address" in launch_of(opened, "dp").argv


def test_render_without_check_and_show_refuse_and_write_nothing(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(build({f"{S}.chat.bind": "0.0.0.0"}), sort_keys=False))
    out = tmp_path / "out"
    rendered = cli("render", "--file", str(path), "--out", str(out), "--no-check")
    assert rendered.code == 2, rendered.stdout + rendered.stderr
    message = " ".join(rendered.stderr.split())
    assert "services.chat.bind: service 'chat' binds 0.0.0.0" in message
    assert "exposure is loopback" in message and "bind 127.0.0.1" in message
    assert "Traceback" not in rendered.stderr
    assert not out.exists() or not any(out.iterdir())
    shown = cli("show", "chat", "--file", str(path))
    assert shown.code == 2 and "binds 0.0.0.0" in shown.stderr
    checked = cli("render", "--file", str(path), "--out", str(out))
    assert checked.code == 2 and "bind-beyond-exposure (L-58)" in " ".join(checked.stderr.split())
