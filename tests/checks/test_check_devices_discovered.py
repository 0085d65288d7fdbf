"""GPU passthrough against the host (rule ``device-not-discovered``): ``facts record --host``
keeps the GPUs ``doctor`` discovers on a host under ``facts/hosts/``, and ``check`` refuses a
device the fleet declares (and a service pinned to it) that the host does not have.

No GPU here: the host's ``nvidia-smi`` is a stand-in on PATH that prints a captured
two-GPU answer (tests/fixtures/doctor/nvidia-smi-2gpu.csv), so doctor's real discovery
and parser run; without it this machine is a host with no GPU at all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from check_helpers import Patch, build
from helpers import FIXTURES

RULE = "device-not-discovered"
DEVICE_RULES = {RULE}
G2 = {"name": "g2", "vendor": "nvidia", "memory": "16GiB"}
TWO = [
    {"name": "g0", "vendor": "nvidia", "memory": "24GiB"},
    {"name": "g1", "vendor": "nvidia", "memory": "16GiB"},
]


def fleet(tmp_path: Path, patch: Patch | None = None) -> Path:
    """The checks' base fleet, its GPU host "gpu" being this machine (doctor runs here)."""
    data = build({"hosts.gpu.address": "127.0.0.1", "hosts.gpu.devices": TWO, **(patch or {})})
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-smi answering as a host with an RTX 3090 (index 0) and a 4060 Ti (index 1)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *memory.used*) cat {FIXTURES / "doctor" / "nvidia-smi-used.csv"};;\n'
        f"*) cat {FIXTURES / 'doctor' / 'nvidia-smi-2gpu.csv'};; esac\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")


def check_doc(cli: Any, path: Path) -> tuple[int, dict[str, Any]]:
    done = cli("check", str(path), "--json", "--offline")
    return done.code, json.loads(done.stdout)


def hits(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in doc["findings"] if f["rule"] == RULE]


def test_recorded_gpus_judge_the_fleets_devices_and_pins(
    cli: Any, tmp_path: Path, two_gpus: None
) -> None:
    path = fleet(tmp_path)
    done = cli("facts", "record", "--host", "gpu", "--file", str(path))
    assert done.code == 0, done.stderr + done.stdout
    said = " ".join(done.stdout.split())
    assert "recorded host 'gpu': facts/hosts/gpu.json" in said
    assert "nvidia:0 NVIDIA GeForce RTX 3090, nvidia:1 NVIDIA GeForce RTX 4060 Ti" in said
    record = json.loads((tmp_path / "facts" / "hosts" / "gpu.json").read_text())
    assert (record["host"], record["gpu_source"]) == ("gpu", "nvidia-smi")
    assert [(g["index"], g["memory"]) for g in record["gpus"]] == [
        (0, 24576 << 20),
        (1, 16380 << 20),
    ]

    # Both declared devices exist there: nothing to say, and check says what it read.
    code, doc = check_doc(cli, path)
    assert hits(doc) == [], hits(doc)
    assert any("facts/hosts/gpu.json (nvidia-smi)" in n for n in doc["notes"]), doc["notes"]

    # A third card declared, a service pinned to it: both refused, before any deploy.
    fleet(tmp_path, {"hosts.gpu.devices": [*TWO, G2], "services.serve.devices": ["g2"]})
    code, doc = check_doc(cli, path)
    assert code == 1
    found = {(h["field"], h["severity"]) for h in hits(doc)}
    assert found == {("hosts.gpu.devices[2]", "error"), ("services.serve.devices", "error")}
    device = next(h for h in hits(doc) if h["field"] == "hosts.gpu.devices[2]")
    assert (
        "device g2 (nvidia index 2) does not exist on gpu; discovered: nvidia:0, nvidia:1"
        in (device["message"])
    )
    assert "inferfleet facts record --host gpu" in device["hint"] and device["line"] is not None
    pinned = next(h for h in hits(doc) if h["field"] == "services.serve.devices")
    assert pinned["service"] == "serve" and "GPU passthrough" in pinned["message"]


def test_a_host_where_doctor_found_no_gpu_fails_every_declared_device(
    cli: Any, tmp_path: Path
) -> None:
    path = fleet(tmp_path)
    # This machine: no GPU, no GPU tool.
    assert cli("facts", "record", "--host", "gpu", "--file", str(path)).code == 0
    assert json.loads((tmp_path / "facts" / "hosts" / "gpu.json").read_text())["gpus"] == []
    code, doc = check_doc(cli, path)
    assert code == 1
    assert [h["field"] for h in hits(doc)] == ["hosts.gpu.devices[0]", "hosts.gpu.devices[1]"]
    assert "no GPU was discovered there" in hits(doc)[0]["message"]


def test_without_a_record_nothing_is_judged_and_a_damaged_one_is_said(
    cli: Any, tmp_path: Path
) -> None:
    path = fleet(tmp_path, {"hosts.gpu.devices": [*TWO, G2]})
    code, doc = check_doc(cli, path)
    assert hits(doc) == []  # doctor on the host compares it live; check has nothing here
    record = tmp_path / "facts" / "hosts" / "gpu.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"format": 1, "host": "other", "gpu_source": null, "gpus": []}')
    code, doc = check_doc(cli, path)
    assert hits(doc) == []
    assert any("recorded GPUs not used" in n and "it records host 'other'" in n
               for n in doc["notes"]), doc["notes"]  # fmt: skip
    # A FIFO in a clone where the record should be: said at once, never waited on.
    record.unlink()
    os.mkfifo(record)
    code, doc = check_doc(cli, path)
    assert hits(doc) == []
    assert any("recorded GPUs not used" in n and "a FIFO" in n for n in doc["notes"]), doc["notes"]


def test_recording_an_unknown_host_is_a_usage_error_and_writes_nothing(
    cli: Any, tmp_path: Path
) -> None:
    path = fleet(tmp_path)
    done = cli("facts", "record", "--host", "nope", "--file", str(path))
    assert done.code == 2
    assert "no host named 'nope'" in done.stderr + done.stdout
    assert not (tmp_path / "facts").exists()
