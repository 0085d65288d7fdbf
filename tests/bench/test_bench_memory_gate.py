"""L-52: a started arm's memory must come back, and no arm starts next to another service.

The incident: a bench ran next to the production server and a previous bench
server, and measured the contention. Each test starts the real llama-server
on the real test model as a bench arm (``bench.arms.started``, the code
``inferfleet bench --arms`` runs):

- an orphan holding host memory (what a previous bench server left behind
  is) keeps the gate from passing: the arm ends in MemoryNotBackError;
- the same on a GPU, through the amdgpu driver's sysfs file the doctor reads:
  a stand-in tree, because this machine has no GPU (the reader is the one
  a real host runs, pointed at that tree); and through ``nvidia-smi`` as the
  gate asks it by default (a stand-in script on PATH, for the same reason);
- a second service of the fleet running on the same device (here the host's
  CPU) refuses the arm, unless ``--share-device`` says to go on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers import free_port
from helpers.real_server import SERVICE, fleet_data, served, write_fleet

from inferfleet.backends.host_facts import device_memory_used
from inferfleet.bench import arms
from inferfleet.bench.arms import ArmSpec, MemoryNotBackError, StartSpec, started
from inferfleet.errors import UsageError
from inferfleet.fleetfile.loader import load_fleet

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SLACK = 256 << 20
HELD = 2 << 30  # well beyond the slack, well within this machine's free memory
# The control's slack: far below what the orphan holds, far above what other processes
# of a busy machine take or give back meanwhile (331 MiB was seen in 30 s on CI).
CONTROL_SLACK = HELD // 2

# A process that touches HELD bytes of anonymous memory, says so, and waits to be killed.
HOLDER = (
    "import sys, time\n"
    "block = bytearray(int(sys.argv[1]))\n"
    "block[::4096] = b'\\x01' * len(range(0, len(block), 4096))\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


def hold_memory(reap: list[psutil.Process]) -> psutil.Process:
    """Start an orphan that holds HELD bytes until the test kills it by pid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(HELD)], stdout=subprocess.PIPE, text=True
    )
    reap.append(psutil.Process(proc.pid))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return reap[-1]


def arm(service: str = SERVICE) -> ArmSpec:
    return ArmSpec(name="a", start=StartSpec(service=service))


def test_L52_an_orphan_holding_memory_fails_the_gate(
    tmp_path: Path, reap: list[psutil.Process], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutation killed: ``life.memory_back = True`` (a gate that always reports memory back)."""
    monkeypatch.setattr(arms, "MEMORY_WAIT_S", 3.0)  # the orphan never lets go: no 30 s wait
    loaded = load_fleet(write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port())))
    notes: list[str] = []
    with (
        pytest.raises(MemoryNotBackError) as caught,
        started(loaded, arm(), notes.append, memory_slack=SLACK) as run,
    ):
        assert run.server is not None and run.server.healthy_after_s is not None
        orphan = hold_memory(reap)
    # The server itself was stopped by pid; the orphan still runs and holds its memory.
    assert not psutil.pid_exists(run.server.pid) or (
        psutil.Process(run.server.pid).status() == psutil.STATUS_ZOMBIE
    )
    assert orphan.is_running() and run.server.memory_back is False
    message = caught.value.render()
    assert "available memory is" in message and "below the" in message
    assert "orphaned server" in message and "L-52" in message
    missing = run.server.available_before - run.server.available_after
    assert missing > SLACK, run.server


def test_L52_memory_that_comes_back_passes_the_gate(
    tmp_path: Path, reap: list[psutil.Process], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: the same orphan, stopped before the arm ends, lets the gate pass."""
    monkeypatch.setattr(arms, "MEMORY_WAIT_S", 30.0)
    loaded = load_fleet(write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port())))
    with started(loaded, arm(), lambda _n: None, memory_slack=CONTROL_SLACK) as run:
        orphan = hold_memory(reap)
        orphan.kill()
        orphan.wait(10)
    assert run.server is not None and run.server.memory_back is True


def fake_amdgpu(root: Path, used: int) -> Path:
    """An amdgpu card in a sysfs tree, as the driver lays it out; returns its used-bytes file."""
    device = root / "sys" / "class" / "drm" / "card0" / "device"
    device.mkdir(parents=True, exist_ok=True)
    (device / "vendor").write_text("0x1002\n")
    (device / "mem_info_vram_total").write_text(f"{24 << 30}\n")
    (device / "mem_info_vram_used").write_text(f"{used}\n")
    return device / "mem_info_vram_used"


def test_L52_device_memory_that_stays_in_use_fails_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An orphan holding 2 GiB of VRAM: the gate reads the GPU, not only host RAM.

    Mutation killed: dropping the per-GPU comparison from ``arms._memory_back``
    (host memory alone comes back here, so only the device reading catches it).
    """
    monkeypatch.setattr(arms, "MEMORY_WAIT_S", 2.0)
    used = fake_amdgpu(tmp_path / "root", 512 << 20)

    def reader() -> dict[str, int]:
        return device_memory_used(tmp_path / "root", tools=False)

    loaded = load_fleet(write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port())))
    with (
        pytest.raises(MemoryNotBackError) as caught,
        started(loaded, arm(), lambda _n: None, memory_slack=SLACK, device_used=reader) as run,
    ):
        used.write_text(f"{(512 << 20) + (2 << 30)}\n")  # what the orphan took
    assert run.server is not None
    assert run.server.device_used_before == {"amd:0": 512 << 20}
    assert run.server.device_used_after == {"amd:0": (512 << 20) + (2 << 30)}
    assert "amd:0 has 2048 MiB more in use than the 512 MiB before it started" in (
        caught.value.render()
    )
    assert "available memory" not in caught.value.render()  # host memory did come back


def two_services(tmp_path: Path) -> Path:
    """The example service and a copy of it on its own port, both on the host's CPU."""
    data = fleet_data(free_port())
    data["services"]["other"] = {**data["services"][SERVICE], "port": free_port()}
    return write_fleet(tmp_path / "fleet.yaml", data)


def test_L52_an_arm_on_a_device_another_service_runs_on_is_refused(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    """Mutation killed: skipping the loop over the fleet's other services in
    ``arms._refuse_if_running`` (only the arm's own service was looked at)."""
    fleet = two_services(tmp_path)
    (tmp_path / "arms.yaml").write_text("arms:\n  - {name: b, start: {service: other}}\n")
    with served(fleet, tmp_path / "state") as production:
        result = cli(
            "bench", "--arms", str(tmp_path / "arms.yaml"), "--file", str(fleet),
            "--api", "completions", "--runs", "1", "--concurrency", "1",
            "--prompt-ids", "two-cities",
            "--max-tokens", "128", "--out", str(tmp_path / "out"), "--json",
        )  # fmt: skip
        assert result.code == 2, result.stdout + result.stderr
        assert f"service 'gemma' is running (pid {production.pid}) on cpu" in result.stderr
        assert "--share-device" in result.stderr and "Traceback" not in result.stderr
        assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
        # Told to share, the arm starts next to it (and is stopped by pid).
        loaded = load_fleet(fleet)
        with started(
            loaded, arm("other"), lambda _n: None, memory_slack=CONTROL_SLACK, share_device=True
        ):
            assert psutil.pid_exists(production.pid)
        with (
            pytest.raises(UsageError),
            started(loaded, arm("other"), lambda _n: None, memory_slack=SLACK),
        ):
            pass


def test_L52_the_gate_asks_nvidia_smi_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate's own reader, as ``bench`` calls it (no reader passed), reads NVIDIA memory.

    ``nvidia-smi`` is a stand-in on PATH printing what the real one prints for
    ``--query-gpu=index,memory.used --format=csv,noheader,nounits`` (this machine
    has no GPU); an orphan's 2 GiB appear on GPU 0 while the arm runs.

    Mutation killed: ``started``'s default reader replaced by one that reads
    nothing (``device_used = lambda: {}``): only host memory would be judged.
    """
    monkeypatch.setattr(arms, "MEMORY_WAIT_S", 2.0)
    tools = tmp_path / "bin"
    tools.mkdir()
    used = tmp_path / "used-mib"
    used.write_text("512")
    smi = tools / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\nprintf "0, %s\\n" "$(cat {used})"\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    loaded = load_fleet(write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port())))
    with (
        pytest.raises(MemoryNotBackError) as caught,
        started(loaded, arm(), lambda _n: None, memory_slack=SLACK) as run,
    ):
        used.write_text(str(512 + 2048))  # what the orphan took
    assert run.server is not None and run.server.device_used_before == {"nvidia:0": 512 << 20}
    assert "nvidia:0 has 2048 MiB more in use than the 512 MiB before it started" in (
        caught.value.render()
    )
