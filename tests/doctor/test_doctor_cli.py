"""``inferfleet doctor`` for real on this machine (no GPU here: it says so and still reports)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from helpers.cli import CliResult

from inferfleet import documents

Cli = Callable[..., CliResult]


def test_doctor_on_this_machine_says_no_gpu_and_reports_the_rest(cli: Cli) -> None:
    human = cli("doctor")
    assert human.code == 0, human.stderr
    assert "GPUs: none found" in human.stdout
    assert "RAM " in human.stdout and "memlock" in human.stdout and "Python 3." in human.stdout
    doc = cli("doctor", "--json").document()
    jsonschema.validate(doc, documents.json_schema("inferfleet.doctor/v1"))
    (host,) = doc["hosts"]
    facts = host["facts"]
    assert facts["gpus"] == [] and facts["gpu_source"] is None and host["devices_yaml"] == ""
    assert facts["ram"] > 0 and facts["disks"] and facts["disks"][0]["free"] > 0


def test_doctor_host_needs_a_fleet_and_a_known_host(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    missing = cli("doctor", "forge")
    assert missing.code == 2 and "needs a fleet file" in missing.stderr
    fleet = Path(__file__).resolve().parents[2] / "examples" / "homelab" / "fleet.yaml"
    unknown = cli("doctor", "--host", "nowhere", "--file", str(fleet))
    assert unknown.code == 2 and "no host named 'nowhere'" in unknown.stderr
    # Positionals name services, as on every verb (a service's host is examined).
    unknown = cli("doctor", "nowhere", "--file", str(fleet))
    assert unknown.code == 2 and "no service named 'nowhere'" in unknown.stderr
