"""``status`` shows the memory in use on each host, where the host can tell: each GPU
(nvidia-smi, the amdgpu driver's sysfs) and its RAM (MemTotal - MemAvailable), the
figure of a CPU host's models.

No GPU here: the NVIDIA figures come from a stand-in ``nvidia-smi`` that prints a
captured answer (tests/fixtures/doctor), the AMD ones from a captured sysfs tree.
The RAM figure is this machine's own, through the real ``status``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, ROOT

from inferfleet.backends.host_facts import memory_used
from inferfleet.doctor import parse
from inferfleet.status.view import memory_cell

DOCTOR = FIXTURES / "doctor"
MIB = 1 << 20
GIB = 1 << 30


def test_gpu_and_ram_in_use_from_the_doctor_parsers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    shutil.copytree(DOCTOR / "sysfs-apu", root)
    shutil.copy(DOCTOR / "meminfo.txt", root / "proc" / "meminfo")
    tools = tmp_path / "bin"
    tools.mkdir()
    smi = tools / "nvidia-smi"  # a stand-in: no NVIDIA GPU on this machine
    smi.write_text(f"#!/bin/sh\ncat {DOCTOR / 'nvidia-smi-used.csv'}\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    used = memory_used(root)
    ram = (65831220 - 60123456) * 1024  # MemTotal - MemAvailable of the capture
    assert used == {"nvidia:0": 18234 * MIB, "nvidia:1": 3 * MIB, "amd:0": 384 * MIB, "ram": ram}
    assert memory_cell(used) == "nvidia:0 17.8 GiB, nvidia:1 0.0 GiB, amd:0 0.4 GiB, ram 5.4 GiB"
    assert memory_used(tmp_path / "no-such-root", tools=False) == {}
    assert memory_cell({}) == "-"


def test_status_shows_this_machines_ram_in_use(cli: Any) -> None:
    result = cli("status", "-f", str(ROOT / "examples/local/fleet.yaml"), "--json")
    (host,) = json.loads(result.stdout)["hosts"]
    mem = parse.meminfo(Path("/proc/meminfo").read_text())
    here = mem.ram - mem.available
    assert set(host["memory"]) >= {"ram"}
    # Read a moment apart: within 256 MiB of what /proc/meminfo says now.
    assert abs(host["memory"]["ram"] - here) < 256 * MIB, (host["memory"], here)
    assert 0 < host["memory"]["ram"] < mem.ram
    shown = cli("status", "-f", str(ROOT / "examples/local/fleet.yaml"))
    assert f"ram {host['memory']['ram'] / GIB:.1f} GiB"[:7] in shown.stdout
