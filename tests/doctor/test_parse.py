"""The doctor's parsers against captured outputs of each tool (tests/fixtures/doctor/README.md)."""

from __future__ import annotations

from pathlib import Path

from helpers import FIXTURES

from inferfleet.backends.host_facts import device_memory_used, discover_gpus, drm_files
from inferfleet.doctor import parse

HERE = FIXTURES / "doctor"
MIB = 1024 * 1024


def text(name: str) -> str:
    return (HERE / name).read_text()


def test_nvidia_two_gpus() -> None:
    gpus = parse.nvidia_smi(text("nvidia-smi-2gpu.csv"))
    assert [(g.index, g.name, g.memory // MIB) for g in gpus] == [
        (0, "NVIDIA GeForce RTX 3090", 24576),
        (1, "NVIDIA GeForce RTX 4060 Ti", 16380),
    ]
    assert gpus[0].bus == "00000000:01:00.0" and gpus[0].uuid.startswith("GPU-")
    assert parse.nvidia_smi("No devices were found\n") == []


def test_device_memory_in_use_nvidia_and_amdgpu() -> None:
    """L-52: what a bench reads before and after an arm, per GPU."""
    assert parse.nvidia_smi_used(text("nvidia-smi-used.csv")) == {0: 18234 * MIB, 1: 3 * MIB}
    assert parse.nvidia_smi_used("No devices were found\n0, n/a\n") == {}
    root = HERE / "sysfs-apu"
    assert parse.drm_vram_used(drm_files(root)) == {0: 384 * MIB}
    assert device_memory_used(root, tools=False) == {"amd:0": 384 * MIB}
    assert device_memory_used(HERE / "no-such-root", tools=False) == {}


def test_amd_smi_both_shapes_and_rocm_smi() -> None:
    wrapped = parse.amd_smi_static(text("amd-smi-static.json"))
    assert [(g.index, g.memory // MIB, g.bus, g.unified) for g in wrapped] == [
        (0, 24560, "0000:03:00.0", False),
        (1, 24560, "0000:43:00.0", False),
    ]
    (mi210,) = parse.amd_smi_static(text("amd-smi-static-list.json"))
    assert mi210.name == "AMD Instinct MI210" and mi210.memory == 65520 * MIB
    rocm = parse.rocm_smi_vram(text("rocm-smi-vram.json"))
    assert [(g.index, g.memory) for g in rocm] == [(0, 34342961152), (1, 34342961152)]
    assert parse.amd_smi_static("not json") == [] and parse.rocm_smi_vram("[]") == []


def test_apu_from_sysfs_reports_the_gtt_and_the_kernel_bound() -> None:
    """L-31: the APU's budget is its GTT aperture, not its 512 MiB carve-out."""
    root = HERE / "sysfs-apu"
    (apu,) = parse.drm_cards(drm_files(root))  # card1-eDP-1 (a connector) is not a card
    assert apu.unified and apu.memory == 512 * MIB and apu.gtt == 64 * 1024 * MIB
    gpus, source, _ = discover_gpus(root, tools=False)
    assert source == "sysfs" and gpus == [apu]
    params = parse.gtt_params((root / "proc" / "cmdline").read_text())
    assert params == {"amdgpu.gttsize": 65536, "ttm.pages_limit": 16777216}
    assert parse.gtt_limit(params) == 64 * 1024 * MIB


def test_no_gpu(tmp_path: Path) -> None:
    assert discover_gpus(tmp_path, tools=False) == ([], None, [])


def test_lspci_atomics_with_and_without() -> None:
    good = parse.lspci_atomics(text("lspci-atomics.txt"))
    assert [(p.bus, p.gpu, p.supported) for p in good] == [
        ("00:01.1", False, True),
        ("03:00.0", True, True),
        ("43:00.0", True, True),
    ]
    bad = parse.lspci_atomics(text("lspci-no-atomics.txt"))
    assert [p.bus for p in bad if p.gpu and not p.supported] == ["03:00.0", "43:00.0"]


def test_meminfo_loginctl_podman_subuid() -> None:
    mem = parse.meminfo(text("meminfo.txt"))
    assert mem.ram == 65831220 * 1024 and mem.swap_total == 8388604 * 1024
    assert parse.lingering(text("loginctl-linger.txt")) is True
    assert parse.lingering("Linger=no\n") is False and parse.lingering("") is None
    assert parse.podman_version("podman version 4.3.1\n") == "4.3.1"
    assert parse.subids("ops:100000:65536\nroot:1:2\n", "ops") == 65536


def test_an_apu_with_a_large_carve_out_is_known_by_its_kfd_node() -> None:
    """L-31: an 8 GiB carve-out is beyond the small-VRAM sign; the KFD node says APU."""
    root = HERE / "sysfs-apu-kfd"
    (apu,) = discover_gpus(root, tools=False)[0]
    assert apu.unified and apu.gtt == 112 * 1024 * MIB and apu.memory == 8 * 1024 * MIB
    cpu_only = "cpu_cores_count 16\nsimd_count 0\n"
    dgpu = "cpu_cores_count 0\nsimd_count 192\n"
    assert parse.kfd_apu([cpu_only, dgpu]) is False and parse.kfd_apu([]) is None
    # A discrete card on a host without an APU is never unified, whatever its GTT.
    assert not parse.is_apu(2 * 1024 * MIB, 64 * 1024 * MIB, False)
    assert parse.is_apu(512 * MIB, 64 * 1024 * MIB, None)


def test_selinux_mode_is_read_from_its_kernel_file(tmp_path: Path) -> None:
    """``/sys/fs/selinux/enforce``: 1 enforcing, 0 permissive; no file, no SELinux."""
    from inferfleet.backends.host_facts import gather

    assert gather([], tmp_path, tools=False).selinux == "disabled"
    enforce = tmp_path / "sys" / "fs" / "selinux" / "enforce"
    enforce.parent.mkdir(parents=True)
    for written, mode in (("1", "enforcing"), ("0", "permissive"), ("2\n", "unknown")):
        enforce.write_text(written)
        assert gather([], tmp_path, tools=False).selinux == mode
    assert parse.selinux_mode("1\n") == "enforcing" and parse.selinux_mode(None) == "disabled"
