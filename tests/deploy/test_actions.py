"""Actions as data: what an apply does, decided from what should run and what runs now.

Pure (no host): the homelab example's systemd, Quadlet and process services
against facts written by hand. The order is the lessons' order: gates first,
stop and clear the name before the port must be free (L-35, L-36), reload
only for a changed unit, health from the service's own process (L-33), the
marker last (L-41).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import ROOT

from inferfleet.deploy.actions import retire_actions, service_actions
from inferfleet.deploy.gates import gates_for
from inferfleet.deploy.inputs import ServiceInputs
from inferfleet.deploy.markers import Marker
from inferfleet.deploy.state import ServiceState
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.render.facts import HostFacts
from inferfleet.render.pipeline import ServiceLaunch, service_launch

FACTS = HostFacts(user="ops", home="/home/ops", cache_dir="/home/ops/.cache/inferfleet")
REV = "0123456789abcdef" * 2 + "01234567"


@pytest.fixture(scope="module")
def homelab() -> LoadedFleet:
    return load_fleet(ROOT / "examples" / "homelab" / "fleet.yaml")


def plan_for(
    loaded: LoadedFleet, name: str, state: ServiceState
) -> tuple[ServiceLaunch, list[str]]:
    desired = service_launch(loaded.fleet, loaded.root, name, FACTS)
    gates = gates_for(desired, loaded.fleet, loaded.root, FACTS)
    return desired, [a.kind for a in service_actions(desired, state, gates, REV)]


def installed(desired: ServiceLaunch) -> dict[str, str]:
    return {f.path: f.sha256 for f in desired.files}


def test_a_new_system_unit(homelab: LoadedFleet) -> None:
    desired, kinds = plan_for(homelab, "coder", ServiceState("coder"))
    assert desired.unit_file is not None
    assert desired.unit_file.path == "/etc/systemd/system/inferfleet-coder.service"
    assert kinds == [
        "gate",  # model files by stat + record
        "gate",  # runtime binary
        "gate",  # devices
        "wait-port",
        "install",
        "install",
        "daemon-reload",
        "enable",
        "restart",
        "health",
        "marker",
    ]


def test_an_unchanged_healthy_unit_is_verified_not_restarted(homelab: LoadedFleet) -> None:
    desired = service_launch(homelab.fleet, homelab.root, "coder", FACTS)
    running = ServiceState(
        "coder",
        pid=4242,
        units={"system:inferfleet-coder.service": "active/running"},
        files=installed(desired),
        healthy=True,
    )
    _desired, kinds = plan_for(homelab, "coder", running)
    assert kinds == ["gate", "gate", "gate", "verify", "marker"]
    # Unhealthy (or answered by a stranger, L-33): restarted after all.
    _desired, kinds = plan_for(homelab, "coder", replace(running, healthy=False))
    assert kinds[3:] == ["stop-unit", "wait-port", "enable", "restart", "health", "marker"]


def test_only_a_changed_env_file_restarts_without_a_reload(homelab: LoadedFleet) -> None:
    desired = service_launch(homelab.fleet, homelab.root, "coder", FACTS)
    files = installed(desired)
    env = next(f.path for f in desired.files if f.kind == "env")
    files[env] = "0" * 64
    state = ServiceState(
        "coder", 1, None, {"system:inferfleet-coder.service": "active/running"}, files, True
    )
    _desired, kinds = plan_for(homelab, "coder", state)
    assert "daemon-reload" not in kinds
    assert kinds[3:] == ["stop-unit", "wait-port", "install", "enable", "restart", "health",
                         "marker"]  # fmt: skip


def test_a_quadlet_container_clears_its_name_and_is_not_enabled(homelab: LoadedFleet) -> None:
    desired, kinds = plan_for(homelab, "chat", ServiceState("chat"))
    assert desired.unit_file is not None
    assert desired.unit_file.path == "/etc/containers/systemd/inferfleet-chat.container"
    assert desired.service_unit == "inferfleet-chat.service"
    gates = [g.check for g in gates_for(desired, homelab.fleet, homelab.root, FACTS)]
    assert gates == ["model:qwen3-30b-a3b", "image", "devices", "quadlet"]
    assert kinds[4:] == ["remove-container", "wait-port", "install", "install",
                         "daemon-reload", "restart", "health", "marker"]  # fmt: skip


def test_a_user_unit_is_gated_on_linger(homelab: LoadedFleet) -> None:
    desired = service_launch(homelab.fleet, homelab.root, "vision", FACTS)
    assert desired.scope == "user"
    assert desired.unit_file is not None
    assert desired.unit_file.path == "/home/ops/.config/systemd/user/inferfleet-vision.service"
    gates = [g.check for g in gates_for(desired, homelab.fleet, homelab.root, FACTS)]
    assert gates[-1] == "linger"
    actions = service_actions(desired, ServiceState("vision"), [], REV)
    assert [a.detail for a in actions if a.kind == "restart"] == [
        "systemctl --user restart inferfleet-vision.service"
    ]


def test_the_process_backend_stops_its_recorded_pid(homelab: LoadedFleet) -> None:
    fleet = homelab.fleet
    coder = fleet.services["coder"].model_copy(update={"backend": "process"})
    loaded = LoadedFleet(
        fleet.model_copy(update={"services": {**fleet.services, "coder": coder}}),
        homelab.path,
        homelab.source,
    )
    desired = service_launch(loaded.fleet, loaded.root, "coder", FACTS)
    assert desired.files == [] and desired.argv[0].endswith("/bin/llama-server")
    running = ServiceState(
        "coder",
        pid=77,
        process_spec="old",
        units={"system:inferfleet-coder.service": "active/running"},
    )
    _desired, kinds = plan_for(loaded, "coder", running)
    # It ran as a unit before: that unit is stopped and disabled so it cannot come back.
    assert kinds[3:] == ["stop", "stop-unit", "disable", "wait-port", "start", "marker"]
    same = replace(running, process_spec=desired.spec, units={}, healthy=True)
    assert plan_for(loaded, "coder", same)[1][3:] == ["verify", "marker"]


def test_a_container_under_the_process_backend_is_podman_run_in_the_foreground(
    homelab: LoadedFleet,
) -> None:
    fleet = homelab.fleet
    chat = fleet.services["chat"].model_copy(update={"backend": "process"})
    edited = fleet.model_copy(update={"services": {**fleet.services, "chat": chat}})
    desired = service_launch(edited, homelab.root, "chat", FACTS)
    argv = desired.argv
    assert argv[:3] == ["/usr/bin/podman", "run", "--rm"] and desired.files == []
    assert desired.container == "inferfleet-chat"
    # Labelled (L-36: a stale container is removed by name and label), never pulled by a
    # start (L-42: the image gate found the pinned digest), never --replace.
    assert argv[argv.index("--label") + 1] == "inferfleet.service=chat" and "--pull=never" in argv
    assert "--replace" not in argv
    # The AMD GPUs of the fleet pass through, with the user's video/render groups.
    assert "/dev/kfd" in argv and "/dev/dri" in argv and "keep-groups" in argv
    assert argv[argv.index("--publish") + 1] == "127.0.0.1:8000:8000"
    assert argv[argv.index("--shm-size") + 1] == "16g"
    # Writable mounts (the /cache of L-37) are made before the start.
    assert desired.make_dirs == [
        m.split(":")[0] for m in argv if m.endswith(":/cache") and not m.endswith(":ro")
    ]
    image = edited.runtimes["vllm-rocm"].image
    assert image is not None and argv[argv.index(image) - 2 : argv.index(image)] == [
        "--entrypoint",
        "vllm",
    ]
    # Tunables and runtime variables reach the container by name, their values from
    # podman's environment: none on the command line (L-06).
    for key, value in desired.env.items():
        assert key in argv and f"{key}={value}" not in argv
    env = desired.process_env({"PATH": "/bin", "CONTAINERS_CONF": "/c", "HF_TOKEN": "x"})
    assert env["CONTAINERS_CONF"] == "/c" and "HF_TOKEN" not in env


def test_retiring_a_quadlet_service_undoes_everything(homelab: LoadedFleet) -> None:
    marker = Marker(
        service="search",
        host="atlas",
        revision=REV,
        inputs=ServiceInputs({}, {}),
        backend="quadlet",
        bind="0.0.0.0",
        port=8888,
        health_path="/health",
        applied_at=0.0,
        by="ops@laptop",
        unit="inferfleet-search",
        installed=[
            "/etc/containers/systemd/inferfleet-search.container",
            "/etc/inferfleet/env/search.env",
        ],
    )
    state = ServiceState("search", 9, None, {"system:inferfleet-search.service": "active/running"})
    actions = retire_actions(marker, state)
    assert [a.kind for a in actions] == [
        "stop-unit",
        "remove-container",
        "uninstall",
        "uninstall",
        "daemon-reload",
        "forget",
    ]


def test_an_nvidia_device_passes_to_a_process_backend_container_by_its_cdi_name() -> None:
    loaded = load_fleet(ROOT / "tests" / "fixtures" / "fleets" / "runtimes.yaml")
    fleet = loaded.fleet
    vl = fleet.services["vl"].model_copy(update={"backend": "process"})
    edited = fleet.model_copy(update={"services": {**fleet.services, "vl": vl}})
    argv = service_launch(edited, loaded.root, "vl", FACTS).argv
    # The CDI name of the fleet's device (its index), as the Quadlet and systemd units have it.
    assert argv[argv.index("--device") + 1] == "nvidia.com/gpu=0" and argv.count("--device") == 1
    assert argv[argv.index("--publish") + 1] == "0.0.0.0:8000:8000"  # its lan exposure (L-58)
