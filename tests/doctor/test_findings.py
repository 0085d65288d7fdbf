"""Findings: the homelab fleet against discovered facts; the discovery gate of apply."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml
from helpers import FIXTURES, ROOT

from inferfleet.backends.host_facts import discover_gpus
from inferfleet.deploy import gates
from inferfleet.deploy.errors import GateError
from inferfleet.doctor import parse
from inferfleet.doctor.findings import devices_yaml, host_findings
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.loader import load_fleet

HOMELAB = ROOT / "examples" / "homelab" / "fleet.yaml"
APU_ROOT = FIXTURES / "doctor" / "sysfs-apu"


def homelab(tmp_path: Path, edit: Any = None) -> Fleet:
    data = yaml.safe_load(HOMELAB.read_text())
    if edit is not None:
        edit(data)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_fleet(path).fleet


def facts(gpus: list[parse.Gpu], source: str | None, **kw: Any) -> parse.Facts:
    values: dict[str, Any] = {"user": "ops", "python": "3.12.1", "ram": 1 << 36, "swap_total": 1}
    values.update(kw)
    return parse.Facts(gpus=gpus, gpu_source=source, **values)


def apu_facts(**kw: Any) -> parse.Facts:
    gpus, source, _ = discover_gpus(APU_ROOT, tools=False)
    return facts(gpus, source, **kw)


def checks(found: list[Any]) -> set[str]:
    return {f.check for f in found}


def test_apu_declared_beyond_its_gtt_is_an_error_with_the_fix(tmp_path: Path) -> None:
    """L-31: nova declares 96 GiB but the GTT aperture is 64 GiB."""
    found = host_findings(apu_facts(linger=True, user_systemd=True), homelab(tmp_path), "nova")
    (memory,) = [f for f in found if f.check == "device-memory"]
    assert memory.severity == "error" and memory.where == "hosts.nova.devices.igpu"
    assert "64.0 GiB" in memory.message and memory.fix == "set memory: 65536MiB (or less) for igpu"

    def fixed(data: dict[str, Any]) -> None:
        data["hosts"]["nova"]["devices"][0]["memory"] = "64GiB"

    after = host_findings(
        apu_facts(linger=True, user_systemd=True), homelab(tmp_path, fixed), "nova"
    )
    assert not [f for f in after if f.severity == "error"]


def test_lingering_off_with_user_units(tmp_path: Path) -> None:
    found = host_findings(apu_facts(linger=False), homelab(tmp_path), "nova")
    (linger,) = [f for f in found if f.check == "linger"]
    assert linger.fix == "sudo loginctl enable-linger ops" and linger.lesson == "L-38"


def test_nvidia_host_with_a_missing_device_and_a_pinned_service(tmp_path: Path) -> None:
    gpus = parse.nvidia_smi((FIXTURES / "doctor" / "nvidia-smi-2gpu.csv").read_text())
    fleet = homelab(tmp_path)
    assert "device-missing" not in checks(host_findings(facts(gpus, "nvidia-smi"), fleet, "forge"))

    def moved(data: dict[str, Any]) -> None:
        data["hosts"]["forge"]["devices"][0]["index"] = 2

    found = host_findings(facts(gpus, "nvidia-smi"), homelab(tmp_path, moved), "forge")
    assert {"device-missing", "service-device"} <= checks(found)
    none = host_findings(facts([], None), fleet, "forge")
    assert "no-gpu" in checks(none)


def test_the_devices_snippet_is_a_valid_fleet_block(tmp_path: Path) -> None:
    gpus, _, _ = discover_gpus(APU_ROOT, tools=False)
    snippet = devices_yaml(gpus)
    assert "memory: 65536MiB" in snippet and "unified_memory: true" in snippet

    def pasted(data: dict[str, Any]) -> None:
        data["hosts"]["nova"]["devices"] = yaml.safe_load(snippet)["devices"]
        for service in data["services"].values():
            if service["host"] == "nova":
                service["devices"] = ["gpu0"]

    fleet = homelab(tmp_path, pasted)
    assert fleet.hosts["nova"].devices[0].memory == 64 * 1024**3


def _service(fleet: Fleet, host: str) -> Any:
    name = next(n for n, s in fleet.services.items() if s.host == host)
    return cast(Any, SimpleNamespace(service=fleet.services[name], name=name))


def test_the_gate_refuses_a_device_discovery_does_not_find(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gates, "_discovered", {})
    monkeypatch.setattr(gates, "SYS_ROOT", APU_ROOT)

    def second(data: dict[str, Any]) -> None:
        devices = data["hosts"]["nova"]["devices"]
        devices[0]["memory"] = "64GiB"
        devices.append({"name": "egpu", "vendor": "amd", "memory": "16GiB", "index": 1})
        for service in data["services"].values():
            if service["host"] == "nova":
                service["devices"] = ["egpu"]

    fleet = homelab(tmp_path, second)
    with pytest.raises(GateError, match="egpu .* does not exist on nova") as caught:
        gates.check_discovered(_service(fleet, "nova"), fleet, "service x")
    assert "Nothing was stopped" in (caught.value.hint or "")
    # The declared GTT beyond the aperture is refused too; a fixed device passes.
    with pytest.raises(GateError, match="96.0 GiB"):
        gates.check_discovered(_service(homelab(tmp_path), "nova"), homelab(tmp_path), "s")
    fixed = homelab(tmp_path, lambda d: d["hosts"]["nova"]["devices"][0].update(memory="64GiB"))
    gates.check_discovered(_service(fixed, "nova"), fixed, "s")


def test_the_gate_is_skipped_where_no_gpu_tool_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gates, "_discovered", {})
    monkeypatch.setattr(gates, "SYS_ROOT", tmp_path)
    fleet = homelab(tmp_path)
    gates.check_discovered(_service(fleet, "nova"), fleet, "s")


def test_discovery_runs_once_per_apply_not_per_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []
    real = gates.discover_gpus

    def counting(root: Path, *, tools: bool) -> Any:
        calls.append(root)
        return real(root, tools=tools)

    monkeypatch.setattr(gates, "_discovered", {})
    monkeypatch.setattr(gates, "SYS_ROOT", APU_ROOT)
    monkeypatch.setattr(gates, "discover_gpus", counting)
    fixed = homelab(tmp_path, lambda d: d["hosts"]["nova"]["devices"][0].update(memory="64GiB"))
    for _ in range(3):
        gates.check_discovered(_service(fixed, "nova"), fixed, "s")
    assert calls == [APU_ROOT]


def test_host_level_findings_each_with_its_fix(tmp_path: Path) -> None:
    """atlas runs Quadlet containers on two AMD GPUs: podman, subids, atomics, Python."""
    amd = parse.amd_smi_static((FIXTURES / "doctor" / "amd-smi-static.json").read_text())
    pci = parse.lspci_atomics((FIXTURES / "doctor" / "lspci-no-atomics.txt").read_text())
    bare = facts(amd, "amd-smi", python="3.10.12", pci=pci, podman="4.3.1", quadlet=False)
    by_check = {f.check: f for f in host_findings(bare, homelab(tmp_path), "atlas")}
    assert by_check["python"].severity == "error"
    assert "podman 4.3.1" in by_check["podman"].message and "5.0" in by_check["podman"].fix
    assert by_check["rootless"].fix.startswith("sudo usermod --add-subuids")
    assert "03:00.0, 43:00.0" in by_check["pcie-atomics"].message
    # w7900a/b declare 48 GiB; the RX 7900 XTX fixture has 24560 MiB.
    assert by_check["device-memory"].fix.startswith("set memory: 24560MiB")
    good_pci = parse.lspci_atomics((FIXTURES / "doctor" / "lspci-atomics.txt").read_text())
    ready = facts(amd, "amd-smi", pci=good_pci, podman="5.4.2", quadlet=True, subuids=65536)
    left = checks(host_findings(ready, homelab(tmp_path), "atlas"))
    assert not left & {"python", "podman", "rootless", "pcie-atomics"}


def test_memlock_and_disk(tmp_path: Path) -> None:
    def mlock(data: dict[str, Any]) -> None:
        data["hosts"]["nova"]["devices"][0]["memory"] = "64GiB"
        for service in data["services"].values():
            if service["host"] == "nova":
                service.setdefault("extra_args", []).append("--mlock")

    small = apu_facts(
        linger=True,
        user_systemd=True,
        memlock=8 << 20,
        disks=[parse.Disk("/models", 1 << 30, 1 << 40)],
    )
    found = host_findings(small, homelab(tmp_path, mlock), "nova", {"/models": 20 << 30})
    by_check = {f.check: f for f in found}
    assert "LimitMEMLOCK=infinity" in by_check["memlock"].fix
    assert "/models has 1.0 GiB free" in by_check["disk"].message
    roomy = apu_facts(
        linger=True,
        user_systemd=True,
        memlock=None,
        disks=[parse.Disk("/models", 1 << 40, 1 << 41)],
    )
    assert not checks(
        host_findings(roomy, homelab(tmp_path, mlock), "nova", {"/models": 20 << 30})
    ) & {
        "memlock",
        "disk",
    }


def test_containers_without_podman_are_a_finding_and_the_image_gate_says_how_to_install(
    tmp_path: Path,
) -> None:
    """A container service that is not Quadlet's (the process or systemd backend runs
    ``podman run``) on a host without podman: doctor says so, the gate refuses cleanly."""

    def process_chat(data: dict[str, Any]) -> None:
        data["services"]["chat"]["backend"] = "process"
        for name, service in data["services"].items():
            if service.get("host") == "atlas" and name != "chat":
                service["backend"] = "systemd"  # only the process backend's finding

    fleet = homelab(tmp_path, process_chat)
    amd = parse.amd_smi_static((FIXTURES / "doctor" / "amd-smi-static.json").read_text())
    found = {f.check: f for f in host_findings(facts(amd, "amd-smi", podman=None), fleet, "atlas")}
    podman = found["podman"]
    assert podman.severity == "error" and "chat" in podman.message
    assert "has no podman" in podman.message and "apt-get install podman runc" in podman.fix
    with_podman = host_findings(facts(amd, "amd-smi", podman="4.3.1"), fleet, "atlas")
    assert "podman" not in checks(with_podman)

    from inferfleet.errors import BackendError
    from inferfleet.render.facts import HostFacts
    from inferfleet.render.pipeline import service_launch

    here = HostFacts("ops", "/home/ops", "/home/ops/.cache/inferfleet", podman=str(tmp_path / "no"))
    desired = service_launch(fleet, HOMELAB.parent, "chat", here)
    (image,) = [
        g for g in gates.gates_for(desired, fleet, HOMELAB.parent, here) if g.check == "image"
    ]
    with pytest.raises(BackendError) as caught:
        gates.run_gate(image, desired, fleet, HOMELAB.parent, here, tmp_path)
    assert f"podman is not installed on this host ({tmp_path / 'no'} not found)" in str(
        caught.value.message
    )
    assert "apt-get install podman runc" in (caught.value.hint or "")


def test_containers_on_an_enforcing_selinux_host_need_the_fleet_to_say_so(
    tmp_path: Path,
) -> None:
    """Podman leaves labels as they are: on an enforcing host a container is refused its
    bind mounts unless they are relabelled, which `selinux: true` on the host asks for."""
    amd = parse.amd_smi_static((FIXTURES / "doctor" / "amd-smi-static.json").read_text())
    fleet = homelab(tmp_path)
    quadlets = sorted(
        n for n, s in fleet.services.items() if s.host == "atlas" and s.backend == "quadlet"
    )
    assert quadlets  # the homelab runs containers on atlas
    enforcing = facts(amd, "amd-smi", podman="5.4.2", quadlet=True, selinux="enforcing")
    (finding,) = [f for f in host_findings(enforcing, fleet, "atlas") if f.check == "selinux"]
    assert finding.severity == "error" and finding.where == "hosts.atlas.selinux"
    assert all(name in finding.message for name in quadlets)
    assert "set selinux: true on host atlas" in finding.fix

    def declared(data: dict[str, Any]) -> None:
        data["hosts"]["atlas"]["selinux"] = True

    relabelled = homelab(tmp_path, declared)
    assert "selinux" not in checks(host_findings(enforcing, relabelled, "atlas"))
    # Permissive or disabled: nothing is refused; a declaration without SELinux is said.
    permissive = facts(amd, "amd-smi", podman="5.4.2", quadlet=True, selinux="permissive")
    assert "selinux" not in checks(host_findings(permissive, fleet, "atlas"))
    disabled = facts(amd, "amd-smi", podman="5.4.2", quadlet=True)
    (info,) = [f for f in host_findings(disabled, relabelled, "atlas") if f.check == "selinux"]
    assert info.severity == "info" and "not enabled" in info.message


def test_a_report_without_selinux_reads_as_disabled() -> None:
    """An older inferfleet on the host prints no selinux fact: read as no SELinux."""
    data = facts([], None).to_json()
    del data["selinux"]
    assert parse.Facts.from_json(data).selinux == "disabled"
